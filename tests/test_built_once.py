"""built_once.py: a build asked for by two pytest-xdist workers at once runs once."""
import os
import subprocess
import sys

ASK = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from built_once import built_once

class Factory:
    def getbasetemp(self):
        return Path(sys.argv[1])

def build(folder):
    with open(Path(sys.argv[1]).parent / "builds.txt", "a") as f:
        f.write(sys.argv[2] + "\\n")
    time.sleep(0.5)  # long enough for the other worker to ask meanwhile
    (folder / "made").write_text(sys.argv[2])
    return folder

print((built_once(Factory(), "thing", build) / "made").read_text())
"""


def test_two_workers_asking_at_once_get_one_build_and_the_same_result(tmp_path):
    script = ASK.format(tests=os.path.dirname(os.path.abspath(__file__)))
    workers = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"popen-gw{i}"), f"gw{i}"],
                                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTEST_XDIST_WORKER": f"gw{i}"})
               for i in range(2)]
    outs = [w.communicate(timeout=60)[0].strip() for w in workers]
    builder = (tmp_path / "builds.txt").read_text().split()
    assert len(builder) == 1 and outs == builder * 2, (builder, outs)
