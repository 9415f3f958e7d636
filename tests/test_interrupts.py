"""Ctrl-C stops every recipe within seconds. A terminal sends SIGINT to the whole process group,
but bash starts a recipe's steps in the background (scripts/lib/common.sh, run_step), and a
non-interactive shell's background jobs ignore SIGINT for good: the recipe passes it on as
SIGTERM, so fine-tuning saves checkpoint_last.pt and stops (as preemption does) and decoding
stops without leaving a file. Each run here would go on for minutes if the signal were lost."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from fairseq.data import Dictionary, data_utils, indexed_dataset

from cli import ENV, REPO
from nlu import marker_squad
from tiny_s2s import tiny_s2s

FOREVER = ["--max-update", "100000", "--num-workers", "0", "--log-interval", "1", "--cpu"]


def start(name, *args):
    """bash scripts/NAME ARGS in a session of its own (its own process group, as in a terminal)."""
    return subprocess.Popen(["bash", os.path.join(REPO, "scripts", name), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **ENV}, cwd=REPO,
                            start_new_session=True)


def output_until(proc, needle, timeout=120):
    """The recipe's output up to the first line that holds ``needle``."""
    seen, deadline = "", time.time() + timeout
    while needle not in seen and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    return seen


def ctrl_c(proc, seen=""):
    """SIGINT to the recipe's process group, as Ctrl-C in its terminal; -> (its whole output,
    seconds from the signal to its exit)."""
    assert proc.poll() is None, f"the recipe ended before Ctrl-C:\n{seen[-2000:]}"
    t = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        out = seen + proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return out, time.monotonic() - t


def left_in_session(sid):
    """The processes still alive (not zombies) in the session ``sid`` (a recipe run by ``start``)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # (state, ppid, pgrp, session, ...)
            alive.append(int(pid))
    return alive


def assert_saved_and_stopped(proc, out, seconds, save):
    assert proc.returncode == 130, out[-2000:]
    assert seconds < 30, f"{seconds:.1f} s after Ctrl-C"  # (on a busy machine; unhandled: never)
    saved = [line for line in out.splitlines() if line.startswith("pmlm: SIGTERM received: saved")]
    assert len(saved) == 1 and str(save / "checkpoint_last.pt") in saved[0], out[-2000:]
    assert os.path.isfile(save / "checkpoint_last.pt")


def mapped(pid, library):
    """Whether the process ``pid`` has loaded a shared library whose path holds ``library``."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return library in f.read()
    except OSError:
        return False


@pytest.mark.parametrize("script,args", [
    ("convert_checkpoint.py", ["export", "model.pt", "out"]),
    ("glue/prepare_glue.py", ["--task", "RTE", "--glue-dir", "src", "--spm-model", "spm.model", "--srcdict",
                              "dict.txt", "--destdir", "out"]),
    ("text_to_databin.py", ["--out", "out", "corpus", "--train", "train.txt"]),
    # the benchmarks (bench_gpu.py imports bench_pretrain.py and bench_generate.py, which guard
    # their own imports: the line still names the command that was run)
    ("bench_gpu.py", ["--smoke"]),
    ("bench_toeplitz.py", ["--smoke"]),
    ("bench_pretrain.py", []),
])
def test_ctrl_c_while_a_python_command_imports_exits_130_with_one_line_and_writes_nothing(tmp_path, script, args):
    """A 28-57-line KeyboardInterrupt traceback through fairseq's (or torch's) import before. (The
    recipes' helpers import neither fairseq nor torch: the next test.)"""
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "scripts", script), *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **ENV})
    deadline = time.time() + 60
    while not mapped(proc.pid, "libtorch") and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)  # until torch is loading: fairseq's import under way
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == f"{os.path.basename(script)}: interrupted: nothing written\n", err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("script", ["recipe_info.py", "score.py", "s2s/get_data.py", "squad/evaluate_squad.py"])
def test_the_recipes_helpers_start_without_importing_fairseq_or_torch(script):
    """They read files (facts, scores, data) several times a recipe: 0.1-0.3 s each, not fairseq's
    ~2.5 s import (the package's registration is skipped: scripts/lib/import_guard.py)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", os.path.join(REPO, "scripts", script), "--help"],
                          capture_output=True, text=True, env={**os.environ, **ENV}, timeout=60)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]
    assert any(m.startswith("fairseq_pmlm.") for m in imported)
    assert not imported & {"fairseq", "torch"}


def session_process(sid, needle, timeout=60):
    """The pid of the first process in session ``sid`` whose command line holds ``needle``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for pid in left_in_session(sid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if needle.encode() in f.read():
                        return pid
            except OSError:
                continue
        time.sleep(0.01)
    raise AssertionError(f"no process running {needle} in session {sid}")


def test_ctrl_c_while_a_recipe_works_out_its_facts_exits_130_without_a_traceback(tmp_path):
    """A Ctrl-C in the facts run (recipe_info.py, here reading a checkpoint: torch's import) printed
    the import's KeyboardInterrupt traceback. Now the recipe exits 130 once that run ends, in silence."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.source-target.source.idx").write_bytes(b"")
    (tmp_path / "model.pt").write_bytes(b"")
    proc = start("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", tmp_path / "model.pt",
                 "--save-dir", tmp_path / "save")
    facts = session_process(proc.pid, "recipe_info.py")
    while not mapped(facts, "libtorch") and os.path.exists(f"/proc/{facts}"):
        time.sleep(0.005)  # until torch is loading
    out, seconds = ctrl_c(proc)
    assert proc.returncode == 130 and "Traceback" not in out and "KeyboardInterrupt" not in out, out[-2000:]
    assert seconds < 30 and left_in_session(proc.pid) == []


def test_ctrl_c_stops_s2s_fine_tuning_within_seconds_saving_checkpoint_last(tmp_path_factory, tmp_path):
    _, data, _ = tiny_s2s(tmp_path_factory)
    save = tmp_path / "save"
    proc = start("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", "none", "--save-dir", save,
                 "--", "--arch", "unilmv2_tiny", "--batch-size", "8", "--disable-validation", *FOREVER)
    out, seconds = ctrl_c(proc, output_until(proc, '"num_updates": "3"'))
    assert_saved_and_stopped(proc, out, seconds, save)


def test_ctrl_c_stops_squad_fine_tuning_whose_output_goes_through_tee_and_keeps_its_log(tmp_path_factory, tmp_path):
    """glue/ and squad/ copy fairseq's output into SAVE/train.log (common.sh, run_step_logged)."""
    _, data, first = tiny_s2s(tmp_path_factory)
    questions = marker_squad(tmp_path / "train.json", random.Random(2), 40)
    save = tmp_path / "save"
    proc = start("squad/finetune_squad.sh", "--data", data, "--train-json", questions, "--dev-json", questions,
                 "--checkpoint", first / "checkpoint_last.pt", "--save-dir", save, "--v2", "--arch", "unilmv2_tiny",
                 "--batch-size", "8", "--max-positions", "32", "--doc-stride", "8", "--",
                 "--max-query-len", "8", "--disable-validation", *FOREVER)
    out, seconds = ctrl_c(proc, output_until(proc, '"num_updates": "3"'))
    assert_saved_and_stopped(proc, out, seconds, save)
    assert "pmlm: SIGTERM received: saved" in (save / "train.log").read_text()
    assert not os.path.exists(save / "predictions.json")  # the recipe stopped, not only its training


def test_ctrl_c_stops_decoding_within_seconds_leaves_no_file_and_no_process(tmp_path_factory, tmp_path):
    """A test split of 20,000 pairs (the tiny one's training pairs, repeated): over a minute of
    decoding, with a data-loading worker process (fairseq's default --num-workers 1), which outlived
    the recipe by seconds."""
    _, tiny, first = tiny_s2s(tmp_path_factory)
    data, n = tmp_path / "data", 20000
    data.mkdir()
    for name in ("dict.txt", "dict.source.txt", "dict.target.txt", "spm.model"):
        os.link(tiny / name, data / name)
    d = Dictionary.load(str(tiny / "dict.txt"))
    for side in ("source", "target"):
        pairs = data_utils.load_indexed_dataset(str(tiny / f"train.source-target.{side}"), d)
        builder = indexed_dataset.make_builder(str(data / f"test.source-target.{side}.bin"), impl="mmap",
                                               vocab_size=len(d))
        for i in range(n):
            builder.add_item(pairs[i % len(pairs)])
        builder.finalize(str(data / f"test.source-target.{side}.idx"))
        del pairs
    (tmp_path / "refs.txt").write_text("a b\n" * n)
    out_dir = tmp_path / "gen"
    proc = start("s2s/generate.sh", "--preset", "demo", "--data", data, "--checkpoint", first / "checkpoint_last.pt",
                 "--refs", tmp_path / "refs.txt", "--out-dir", out_dir, "--", "--cpu", "--max-len-b", "4",
                 "--beam", "2")

    def decoding():  # fairseq-generate has written its first hypotheses into the recipe's temp dir
        logs = [out_dir / t / "generate-test.txt" for t in (os.listdir(out_dir) if out_dir.is_dir() else [])]
        return any(os.path.isfile(f) and os.path.getsize(f) for f in logs)

    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not decoding():
        time.sleep(0.05)
    out, seconds = ctrl_c(proc)
    left = left_in_session(proc.pid)  # the moment the recipe has ended
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, out[-2000:]
    assert seconds < 20, f"{seconds:.1f} s after Ctrl-C"
    assert left == [], f"still running after the recipe ended: {left}"
    assert not out_dir.exists()  # no result, no temp dir, and not the empty out dir it made


def test_a_signal_python_drops_in_a_finalizer_is_sent_again_and_stops_the_command():
    """A handler runs wherever the main thread is; inside a ``__del__`` Python prints the handler's
    KeyboardInterrupt as "Exception ignored" and drops it. The command then ran on to its end (here
    5 s; for a training, hours) with both signals ignored: no later Ctrl-C or SIGTERM stopped it."""
    from fairseq_pmlm.runtime.interrupts import one_line_exit

    class SignalledWhileFinalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs right here, inside the finalizer

    went_on = []

    def command():
        SignalledWhileFinalized()  # finalized at once
        time.sleep(5)  # a wait (a child's exit, say): the signal sent again cuts it short
        went_on.append(True)

    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    t = time.monotonic()
    assert one_line_exit("cmd", command) == 130 and not went_on
    assert time.monotonic() - t < 2
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers
