"""Running the real fairseq command lines on tiny corpora, for test_train_e2e.py and
test_bad_input.py (shared here, not in conftest.py, so the two files own their fixtures).

Speed (a 2-core machine): a fairseq-train process spends ~6 s importing and then trains the
tiny model in milliseconds per update, so fairseq's console scripts run from a warm process
(warm.py: the imports once), every command with one intra-op thread (much faster than two for
tensors this small), and independent commands two at a time in a small thread pool (``submit``).
"""
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import warm

from built_once import built_once

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_DIR = os.path.join(REPO, "fairseq_pmlm")
BIN = os.path.dirname(sys.executable)  # the console scripts of this environment
ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}

_POOL = ThreadPoolExecutor(max_workers=2)


def run(cmd, *args, check=True, stdin=None):
    """Run a fairseq console script; returns the CompletedProcess (fairseq logs to stdout,
    tracebacks go to stderr). A fairseq console script runs from the warm process (warm.py)."""
    exe = os.path.join(BIN, cmd)
    argv, env = [exe if os.path.exists(exe) else shutil.which(cmd) or cmd, *map(str, args)], {**os.environ, **ENV}
    if warm.takes(argv):
        proc = warm.run(argv, env=env, cwd=REPO, timeout=300, stdin=stdin)
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, input=stdin, env=env, cwd=REPO, timeout=300)
    return _checked(cmd, proc) if check else proc


def _checked(name, proc):
    """``proc``, which must have succeeded: else an AssertionError with the ends of its output."""
    if proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def run_script(script, *args, timeout=300):
    """``python SCRIPT ARGS`` (SCRIPT: a path in the repository), from the warm process (warm.py), as a
    CompletedProcess. For a script that no test signals or watches as a process."""
    return warm.run([sys.executable, os.path.join(REPO, script), *map(str, args)], env={**os.environ, **ENV},
                    cwd=REPO, timeout=timeout)


def recipe(name, *args, check=True, cwd=REPO, timeout=300):
    """``bash scripts/NAME ARGS`` in ``cwd``, its fairseq console scripts and python scripts from
    the warm process (warm.site_env); the CompletedProcess (``check``: its output in the assertion
    on failure). For recipes that no test signals or watches as processes."""
    proc = subprocess.run(["bash", os.path.join(REPO, "scripts", name), *map(str, args)], capture_output=True,
                          text=True, env=warm.site_env({**os.environ, **ENV}), cwd=cwd, timeout=timeout)
    return _checked(name, proc) if check else proc


def drive(plans, path, timeout=300):
    """tests/kill_driver.py on ``plans`` (written to ``path``): one result dict per plan."""
    path.write_text(json.dumps(plans))
    proc = _checked("tests/kill_driver.py", run_script("tests/kill_driver.py", path, timeout=timeout))
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(plans), proc.stdout[-2000:] + proc.stderr[-3000:]
    return results


def run_main(main, *args):
    """A package command line's ``main(ARGS)`` in this process, as the script would run it: the
    result reads like a CompletedProcess (returncode, stdout, stderr). The scripts themselves are
    ``sys.exit(main())``; run in-process, each case saves fairseq's ~3 s import."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:  # argparse's errors and --help
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return SimpleNamespace(returncode=rc or 0, stdout=out.getvalue(), stderr=err.getvalue())


def submit(fn, *args, **kwargs):
    """Run ``fn`` (e.g. ``train``) in the two-worker pool; returns a Future. A pool job must
    not wait on another pool job (two workers could deadlock): chain inside one function."""
    return _POOL.submit(fn, *args, **kwargs)


def free_port():
    """A TCP port nothing listens on now (for a rendezvous address)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_corpus(path, documents):
    """documents: list of lists of sentences -> one sentence a line, a blank line between."""
    with open(path, "w") as f:
        for doc in documents:
            f.write("\n".join(doc) + "\n\n")


def binarize(train_txt, valid_txt, destdir, srcdict=None, in_process=False):
    """fairseq-preprocess --only-source of two text files, as a subprocess (the real CLI) or
    in-process (fast, the same code)."""
    args = ["--only-source", "--trainpref", train_txt, "--validpref", valid_txt,
            "--destdir", destdir, "--workers", "1"] + (["--srcdict", srcdict] if srcdict else [])
    if in_process:
        preprocess_in_process(*args)
    else:
        run("fairseq-preprocess", *args)
    return destdir


def preprocess_in_process(*args):
    """fairseq-preprocess ARGS in this process: the CLI's own code, without its ~4 s start."""
    from fairseq import options
    from fairseq_cli import preprocess as fairseq_preprocess

    log = logging.getLogger("fairseq_cli.preprocess")
    before = list(log.handlers)
    try:  # it adds a FileHandler per call: close it again
        fairseq_preprocess.main(options.get_preprocessing_parser().parse_args(list(map(str, args))))
    finally:
        for h in log.handlers[len(before):]:
            log.removeHandler(h)
            h.close()


def preprocess(tmp, documents, name="bin", srcdict=None, valid=None, in_process=False):
    """Write ``documents`` (and as valid split ``valid``, else the first four documents) to
    text files in ``tmp`` and binarize them into ``tmp / name``."""
    write_corpus(tmp / f"{name}.train.txt", documents)
    write_corpus(tmp / f"{name}.valid.txt", valid if valid is not None else documents[:4])
    return binarize(tmp / f"{name}.train.txt", tmp / f"{name}.valid.txt", tmp / name, srcdict, in_process)


def shared_corpus(tmp_path_factory, name="memorisable"):
    """The suite run's binarized memorisable corpus (real fairseq-preprocess, run once: ``built_once``)."""
    return built_once(tmp_path_factory, name, lambda tmp: preprocess(tmp, memorisable_documents()))


def train_args(data, save_dir, *extra, arch="unilmv2_tiny"):
    """fairseq-train arguments with this plugin; 16 examples a batch, so the 64-document
    memorisable corpus is 4 updates an epoch."""
    return [data, "--user-dir", USER_DIR, "--task", "pseudo_masked_lm", "--arch", arch,
            "--criterion", "pmlm", "--optimizer", "adam", "--lr", "2e-3", "--batch-size", "16",
            "--tokens-per-sample", "64", "--save-dir", save_dir, "--log-format", "json",
            "--num-workers", "0", "--seed", "3", "--cpu",
            "--required-batch-size-multiple", "1", *extra]


def train(data, save_dir, *extra, check=True, arch="unilmv2_tiny"):
    """The fairseq-train console script, in its own process."""
    return run("fairseq-train", *train_args(data, save_dir, *extra, arch=arch), check=check)


def train_many(runs):
    """Several short fairseq-train runs, one after the other (each from the warm process, warm.py:
    no import each). ``runs``: list of (data, save_dir, *extra). Returns one CompletedProcess per run,
    failed ones included."""
    return [train(*r, check=False) for r in runs]


def records(proc, tag="train_inner"):
    """fairseq's json log records of one kind (train_inner, train, valid), in order."""
    marker = f"| {tag} | "
    return [json.loads(line.split(marker, 1)[1])
            for line in (proc.stdout + proc.stderr).splitlines() if marker in line]


def checkpoints(save_dir):
    """Checkpoint files in ``save_dir`` (none if it does not exist)."""
    if not os.path.isdir(save_dir):
        return []
    return sorted(f for f in os.listdir(save_dir) if f.endswith(".pt") or ".pt." in f or f.endswith(".tmp"))


def assert_fails_with(proc, *needles, tail_lines=30):
    """The process exited non-zero and one line among the last ``tail_lines`` of stderr
    (after fairseq's traceback) carries all of ``needles``."""
    assert proc.returncode != 0, f"expected a failure, got rc=0:\n{proc.stdout[-2000:]}"
    tail = proc.stderr.strip().splitlines()[-tail_lines:]
    hits = [line for line in tail if all(n in line for n in needles)]
    assert hits, f"no stderr line of the last {tail_lines} has {needles!r}:\n" + "\n".join(tail)
    return hits[0]


def log_line(proc, pattern):
    """The first log line matching the regular expression ``pattern``."""
    for line in (proc.stdout + proc.stderr).splitlines():
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no log line matches {pattern!r}:\n{proc.stdout[-3000:]}")


def memorisable_documents():
    """A handful of fixed documents of a 46-word vocabulary, repeated 16 times: a tiny
    model can learn to recall every masked token almost perfectly."""
    docs = [
        ["the quick brown fox jumps over the lazy dog .", "a stitch in time saves nine ."],
        ["all that glitters is not gold .", "fortune favours the bold and the brave ."],
        ["an apple a day keeps the doctor away .", "the early bird catches the worm ."],
        ["practice makes perfect in every craft .", "actions speak louder than words ."],
    ]
    return docs * 16
