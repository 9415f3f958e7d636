#!/usr/bin/env python
"""Pre-training start memory at corpus scale: ``fairseq-train`` for 2 updates on the CPU, PMLM
(``pseudo_masked_lm``, unilmv2_tiny) next to stock fairseq ``masked_lm`` (a roberta of the same
tiny size, ``--sample-break-mode complete``) on one synthetic data-bin; prints a markdown table
(task, seconds, peak RSS).

    python scripts/bench_start_memory.py [--lines 20000000] [--keep DIR]

The data-bin (--lines lines, ~22 tokens a line, a blank line every ~10 as a document end, random
ids of a 30k-symbol dict.txt) is written straight in fairseq's mmap format; with --keep DIR it is
kept there (and reused by the next run), else written under /tmp and deleted. Each command runs
in its own process; its peak RSS is the kernel's (``os.wait4``). Paste the table into
docs/BENCHMARKS.md with the machine and commit.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from lib.synthetic_databin import write_dictionary, write_synthetic_databin  # scripts/lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYMBOLS = 30000
COMMON = ["--tokens-per-sample", "128", "--batch-size", "8", "--max-update", "2", "--optimizer", "adam",
          "--lr", "1e-4", "--cpu", "--num-workers", "0", "--disable-validation", "--no-save", "--seed", "1",
          "--log-format", "simple"]
TASKS = {
    "pseudo_masked_lm (unilmv2_tiny)": ["--user-dir", os.path.join(REPO, "fairseq_pmlm"), "--task",
                                        "pseudo_masked_lm", "--criterion", "pmlm", "--arch", "unilmv2_tiny"],
    "masked_lm (roberta, same tiny size)": ["--task", "masked_lm", "--criterion", "masked_lm", "--arch",
                                            "roberta_base", "--sample-break-mode", "complete",
                                            "--encoder-layers", "2", "--encoder-embed-dim", "64",
                                            "--encoder-ffn-embed-dim", "128", "--encoder-attention-heads", "4"],
}


def databin(directory, lines):
    """train (``lines`` lines) and a small valid split; reused when already there."""
    if os.path.isfile(os.path.join(directory, "train.idx")):
        return directory
    os.makedirs(directory, exist_ok=True)
    write_dictionary(os.path.join(directory, "dict.txt"), SYMBOLS)
    for split, n, seed in (("valid", 1000, 1), ("train", lines, 0)):
        # ~22 tokens a line with the blank lines: text lines 3..46 items (EOS included)
        write_synthetic_databin(os.path.join(directory, split), n, 3, 47, 0.1, n_symbols=SYMBOLS, seed=seed)
    return directory


def run(cmd):
    """(seconds, peak RSS in bytes) of ``cmd``, run to its end."""
    t = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t
        if os.waitstatus_to_exitcode(status) != 0:
            log.seek(0)
            sys.exit(f"bench_start_memory: {' '.join(cmd)} failed:\n{log.read().decode()[-3000:]}")
    return seconds, usage.ru_maxrss * 1024  # kB on Linux


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=int, default=20_000_000, help="lines of the training split")
    p.add_argument("--keep", metavar="DIR", help="write (or reuse) the data-bin here and keep it")
    a = p.parse_args()
    directory = a.keep or tempfile.mkdtemp(prefix="bench_start_memory", dir="/tmp")
    try:
        t = time.perf_counter()
        databin(directory, a.lines)
        print(f"data-bin: {a.lines:,} lines in {directory} ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
        train = shutil.which("fairseq-train") or sys.exit("bench_start_memory: fairseq-train not on PATH")
        print(f"| task ({a.lines / 1e6:g}M lines, 2 updates, CPU) | seconds | peak RSS |")
        print("|---|---:|---:|")
        for name, flags in TASKS.items():
            # fairseq-train makes its --save-dir even with --no-save: in the data-bin's folder, not the repo
            save_dir = os.path.join(directory, "checkpoints")
            seconds, rss = run([train, directory, *flags, *COMMON, "--save-dir", save_dir])
            print(f"| {name} | {seconds:.1f} | {rss / 2**30:.2f} GB |", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
