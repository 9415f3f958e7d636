#!/usr/bin/env python
"""Pre-training cost on this machine: PMLM (AE+PAR) vs AE-only vs stock fairseq RoBERTa.

Same model shape, same batch of contexts, one full fairseq ``Trainer.train_step`` each
(forward, backward, Adam). Also measures the data pipeline (examples/s). Prints a
markdown table; paste it into docs/BENCHMARKS.md with the machine and commit.

    python scripts/bench_pretrain.py [--layers 4 --dim 256 --heads 4 --batch 8 --length 512]
"""
import argparse
import contextlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the imports below, one line

with interruptible():
    import numpy as np
    import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_corpus(path, docs=64, seed=0, vocab=2000):
    """Random documents of random 'words' (speed only depends on shapes). Each document is
    one very long line, which the task cuts into full-length contexts."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]
    with open(path, "w") as f:
        for _ in range(docs):
            f.write(" ".join(rng.choice(words, size=2000)) + "\n\n")


def setup(argv):
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    task.load_dataset("train")
    return task, Trainer(cfg, task, model, criterion)


def time_updates(trainer, sample, warmup, steps):
    """Median seconds of one update on ``sample`` (or on a list of batches: one update
    accumulated over them, as --update-freq does)."""
    batches = sample if isinstance(sample, list) else [sample]
    return time_calls(lambda: trainer.train_step(batches), warmup, steps)


def time_calls(fn, warmup, steps):
    """Median seconds of ``fn()`` after ``warmup`` untimed calls, the device's queued work included."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        synchronize()
        t = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


@contextlib.contextmanager
def peak_memory_kept():
    """fairseq's Trainer resets CUDA's peak-memory counter at the end of every update (it logs gb_free):
    while a bench reads the peak of its updates, that reset is a no-op."""
    reset = torch.cuda.reset_peak_memory_stats
    torch.cuda.reset_peak_memory_stats = lambda *args, **kwargs: None
    try:
        yield
    finally:
        torch.cuda.reset_peak_memory_stats = reset


def synchronize():
    """Wait for queued GPU work, so that a timer measures it."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def binarize(work, vocab=2000, docs=64):
    """A random corpus in ``work``, binarized by fairseq-preprocess (in this process: a new one would
    import fairseq again, ~3 s); returns the data dir."""
    from fairseq import options
    from fairseq_cli.preprocess import main as preprocess

    make_corpus(os.path.join(work, "train.txt"), docs=docs, vocab=vocab)
    preprocess(options.get_preprocessing_parser().parse_args(
        ["--only-source", "--trainpref", f"{work}/train.txt", "--destdir", f"{work}/bin", "--workers", "1"]))
    return f"{work}/bin"


def full_length_batch(ds, batch, length):
    """``batch`` contexts of exactly ``length`` tokens, collated by the dataset."""
    full = [i for i in range(len(ds)) if ds.size(i) == length][:batch]
    assert len(full) == batch, "corpus too small for the batch"
    return ds.collater([ds[i] for i in full])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=8, help="sequences per update")
    p.add_argument("--length", type=int, default=512, help="context tokens per sequence")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--pipeline-examples", type=int, default=2000)
    a = p.parse_args()
    torch.manual_seed(0)

    work = tempfile.mkdtemp(prefix="bench_pmlm_")
    try:
        run(a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(a, work):
    binarize(work)
    shape = [
        "--encoder-layers", str(a.layers), "--encoder-embed-dim", str(a.dim),
        "--encoder-ffn-embed-dim", str(4 * a.dim), "--encoder-attention-heads", str(a.heads),
    ]
    common = [f"{work}/bin", "--optimizer", "adam", "--lr", "1e-4", "--max-tokens", "100000",
              "--tokens-per-sample", str(a.length), "--cpu", "--seed", "1"] + shape

    rows = []
    pmlm_examples_per_s = None
    for name, objective in (("pmlm ae+par", "ae+par"), ("pmlm ae only", "ae")):
        task, trainer = setup(common + ["--user-dir", os.path.join(REPO, "fairseq_pmlm"),
                                        "--task", "pseudo_masked_lm", "--arch", "unilmv2_base",
                                        "--criterion", "pmlm", "--objective", objective])
        ds = task.dataset("train")
        sample = full_length_batch(ds, a.batch, a.length)
        sec = time_updates(trainer, sample, a.warmup, a.steps)
        rows.append((name, sec, a.batch * a.length, sample["ntokens"]))
        if objective == "ae+par":
            ds.set_epoch(1)
            t = time.perf_counter()
            n = 0
            while n < a.pipeline_examples:
                idx = [(n + j) % len(ds) for j in range(a.batch)]
                ds.collater([ds[i] for i in idx])
                n += a.batch
            pmlm_examples_per_s = n / (time.perf_counter() - t)

    task, trainer = setup(common + ["--task", "masked_lm", "--arch", "roberta_base",
                                    "--criterion", "masked_lm", "--sample-break-mode", "none"])
    ds = task.dataset("train")
    sample = ds.collater([ds[i] for i in range(a.batch)])
    assert sample["net_input"]["src_tokens"].shape == (a.batch, a.length)
    sec = time_updates(trainer, sample, a.warmup, a.steps)
    rows.append(("fairseq roberta masked_lm", sec, a.batch * a.length, sample["ntokens"]))

    ae_sec = rows[1][1]
    print(f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads; model {a.layers}x{a.dim}, "
          f"{a.heads} heads; batch {a.batch} x {a.length} context tokens\n")
    print("| run | update (ms) | context tok/s | processed tok/s | tokens per example | update time vs AE-only |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, sec, ctx, processed in rows:
        print(f"| {name} | {1000 * sec:.0f} | {ctx / sec:,.0f} | {processed / sec:,.0f} | "
              f"{processed / a.batch:.0f} | {sec / ae_sec:.2f}x |")
    print(f"\ndata pipeline (pseudo_masked_lm examples + collate, {a.length}-token contexts, one "
          f"process): {pmlm_examples_per_s:,.0f} examples/s")


if __name__ == "__main__":
    from fairseq_pmlm.runtime.interrupts import one_line_exit

    # Ctrl-C or SIGTERM: 130, one line, no traceback
    sys.exit(one_line_exit("bench_pretrain.py", main))
