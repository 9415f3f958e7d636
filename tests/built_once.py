"""Fixtures' builds shared by test files (the tiny seq2seq run, the tiny pre-trained model and its
GLUE and SQuAD runs, a binarized corpus), made once per suite run, not once per pytest-xdist worker:
the suite's two workers take test files as they come, so a build wanted by files on both of them
was made twice (up to ~60 s of CPU on a 2-core machine). The first process to ask builds it, under
a lock, in a folder of the run that every worker shares; the others wait for it and read its result.
"""
import fcntl
import os
import pickle
import tempfile
import threading
from pathlib import Path

_MEMO = {}
_MEMO_LOCK = threading.Lock()


def built_once(tmp_path_factory, name, build):
    """``build(folder)``'s result (picklable: paths, text, a CompletedProcess) for this suite run.
    A build that raised leaves no result: the next caller builds afresh (in a folder of its own)."""
    with _MEMO_LOCK:
        if name in _MEMO:
            return _MEMO[name]
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's pytest-N: each worker's own basetemp is popen-gwK inside it
    result = root / f"{name}.pickle"
    # flock: another process, and another thread of this one (its own open file), waits here
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if result.exists():
            value = pickle.loads(result.read_bytes())
        else:
            value = build(Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root)))
            partial = result.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(value))
            os.replace(partial, result)
    with _MEMO_LOCK:
        _MEMO[name] = value
    return value
