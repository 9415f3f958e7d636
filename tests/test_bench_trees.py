"""scripts/bench_trees.py: the same rows on several trees in turn, each against the first."""
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".gpu", ".whl", "data-bin", "outputs", "checkpoints", "runs",
                                    "__pycache__", ".pytest_cache", ".ruff_cache")


def run(*args):
    return subprocess.run([sys.executable, "scripts/bench_trees.py", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": REPO})


def test_bench_trees_smoke_times_each_tree_with_its_own_plugin_and_a_ratio_to_the_first(tmp_path):
    """A git revision (where the checkout has its history) and a copy of the repository: a table
    with a time per round and, after the first tree, a ratio (one round, to spare the CPU); then the
    copy's plugin broken, which only a process running that copy's own code can notice: the run
    names that tree and stops. A tree that is neither a directory nor a revision: one line."""
    has_git = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True).returncode == 0
    first = "HEAD" if has_git else REPO
    copy = str(shutil.copytree(REPO, tmp_path / "copy", ignore=NOT_SOURCE))
    ok = run("--smoke", "--rounds", "1", "--rows", "ae+par-fp16", first, copy)
    assert ok.returncode == 0, ok.stderr[-2000:]
    lines = [line for line in ok.stdout.splitlines() if line.startswith("| ")]
    assert lines[0] == f"| row | {first} | {copy} |", ok.stdout
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in lines[1:]}
    assert list(rows) == ["ae+par-fp16"], ok.stdout
    for a, b in rows.values():  # each round's time after the median (one round here), then the ratio
        assert a.endswith(")") and b.endswith("x") and float(b.split(": ")[1][:-1]) > 0, rows
    assert ok.stderr.count("bench_trees: round 1 of 1") == 2, ok.stderr

    with open(os.path.join(copy, "fairseq_pmlm", "__init__.py"), "a") as f:
        f.write("\nraise ImportError('this tree is broken')\n")
    broken = run("--smoke", "--rounds", "1", "--rows", "ae+par-fp16", copy, REPO)
    assert broken.returncode != 0 and "this tree is broken" in broken.stderr, broken.stderr[-2000:]
    assert f"bench_trees.py: error: {copy}: its rows failed" in broken.stderr

    wrong = run("--smoke", "no-such-tree-or-rev")
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "no-such-tree-or-rev: neither a directory nor a git revision of this repository" in wrong.stderr


def test_a_revision_named_twice_is_exported_twice_for_an_a_a_run(tmp_path, monkeypatch):
    if subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("this checkout has no git history to export")
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_trees

    first, second = bench_trees.export("HEAD", str(tmp_path)), bench_trees.export("HEAD", str(tmp_path))
    assert first != second
    assert all(os.path.isfile(os.path.join(p, "scripts", "bench_trees.py")) for p in (first, second))
