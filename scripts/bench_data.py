#!/usr/bin/env python
"""The pre-training data path at scale, measured on this machine; prints one markdown table.

Rows: tokenisation MB/s per worker for 1 and 2 workers (WordPiece, sentencepiece); writing the
data-bin (binarisation) MB/s; end to end text -> data-bin MB/s and peak RSS for inputs of the
--sizes given (MB; the text of --text repeated to that size); the pre-training example index
(build seconds, resident bytes per line) for synthetic data-bins of --index-lines lines,
written straight in fairseq's mmap format, next to the old Python packing on the smallest;
data loader examples/s per worker for fairseq's --num-workers 0/1/2.

    python scripts/bench_data.py --text corpus.txt --wordpiece-vocab vocab.txt \
        [--sizes 100,1000] [--index-lines 1000000,10000000,100000000] [--workdir /tmp/bench_data]

Each measurement runs in its own process (peak RSS is per process). Paste the table into
docs/BENCHMARKS.md with the machine and commit.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

from lib.synthetic_databin import write_synthetic_databin  # scripts/lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINE = os.path.join(REPO, "scripts", "text_to_databin.py")
SUMMARY = re.compile(r"([\d,.]+) MB of text in ([\d.]+) s: ([\d.]+) MB/s end to end; tokenising ([\d.]+) s "
                     r"\(([\d.]+) MB/s, (\d+) worker\(s\)\), writing the data-bin ([\d.]+) s \(([\d.]+) MB/s\); "
                     r"peak RSS ([\d,]+) MB(?: \(the largest child process: ([\d,]+) MB\))?")


def sized_copy(text, mb, workdir):
    """``text`` repeated (whole copies, then a part cut at a line end) to ``mb`` MB."""
    out = os.path.join(workdir, f"text{mb:g}MB.txt")
    want = int(mb * 2**20)
    if os.path.isfile(out) and os.path.getsize(out) == want:
        return out
    data = open(text, "rb").read()
    with open(out, "wb") as f:
        left = want
        while left > 0:
            chunk = data[:left]
            f.write(chunk)
            left -= len(chunk)
    return out


def run_engine(workdir, name, train, valid, tokenizer, workers, extra=()):
    out = os.path.join(workdir, name)
    cmd = [sys.executable, ENGINE, "--prog", "bench", "--out", out, "--workers", str(workers), "--force",
           "corpus", "--train", train, "--valid", valid, *tokenizer, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_data: {' '.join(cmd)} failed:\n{proc.stderr}")
    m = SUMMARY.search(proc.stdout)
    mb, total, e2e, tok_s, tok_mbs, w, write_s, write_mbs, rss, per_worker = m.groups()
    return {"mb": float(mb.replace(",", "")), "total": float(total), "e2e": float(e2e), "tok": float(tok_mbs),
            "write": float(write_mbs), "rss": float(rss.replace(",", "")),
            "worker_rss": float((per_worker or "0").replace(",", "")), "out": out}


def synthetic_databin(prefix, lines, seed=0):
    """A data-bin of ``lines`` items shaped like sentence-per-line text (sizes 5..60, a blank
    line of size 1 after every ~20); the .bin is a sparse file of the right length (the index
    reads sizes only)."""
    if not os.path.isfile(prefix + ".idx"):
        write_synthetic_databin(prefix, lines, 5, 61, 0.05, seed=seed)
    return prefix


INDEX_PROBE = r"""
import sys, time
from fairseq.data.indexed_dataset import MMapIndexedDataset
def status(key):  # kB
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0])
import numpy as np
which = sys.argv[2]
if which == "new":
    from fairseq_pmlm.data.document_index import build_document_index as build
else:
    from pack_reference import pack_documents as build
ds = MMapIndexedDataset(sys.argv[1])
open("/proc/self/clear_refs", "w").write("5")  # peak RSS (VmHWM) from here on
base = status("VmRSS")
t = time.perf_counter()
index = build(ds.sizes, 509)
dt = time.perf_counter() - t
print(len(ds), dt, (status("VmHWM") - base) * 1024, len(index) if which == "new" else len(index[1]) - 1)
"""


def index_row(prefix, which):
    # the reference packer is a test helper (tests/pack_reference.py), found through PYTHONPATH
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(REPO, "tests"),
                                                                     os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", INDEX_PROBE, prefix, which], capture_output=True, text=True,
                          cwd=REPO, env=env)
    if proc.returncode != 0:
        sys.exit(f"bench_data: index probe failed:\n{proc.stderr[-2000:]}")
    lines, seconds, peak_bytes, examples = proc.stdout.split()[-4:]
    return int(lines), float(seconds), float(peak_bytes), int(examples)


LOADER_PROBE = r"""
import sys, time
import fairseq_pmlm  # registers the task
from fairseq_pmlm.tasks.pseudo_masked_lm import PseudoMaskedLMConfig, PseudoMaskedLMTask
task = PseudoMaskedLMTask.setup_task(PseudoMaskedLMConfig(data=sys.argv[1], seed=1, tokens_per_sample=512))
task.load_dataset("train")
ds = task.datasets["train"]
itr = task.get_batch_iterator(ds, max_sentences=16, num_workers=int(sys.argv[2]), seed=1,
                              required_batch_size_multiple=1).next_epoch_itr(shuffle=True)
n, t, seconds = 0, None, float(sys.argv[3])
for i, batch in enumerate(itr):
    if i == 2:
        t, n = time.perf_counter(), 0  # after the workers started
    n += batch["nsentences"]
    if t and time.perf_counter() - t > seconds:
        break
print(n / (time.perf_counter() - t))
"""


def loader_row(data, workers, seconds):
    proc = subprocess.run([sys.executable, "-c", LOADER_PROBE, data, str(workers), str(seconds)],
                          capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"bench_data: loader probe failed:\n{proc.stderr[-2000:]}")
    return float(proc.stdout.split()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--text", required=True, help="real text, one sentence a line (repeated to each size)")
    p.add_argument("--wordpiece-vocab", required=True, help="a BERT vocab.txt (e.g. convert_checkpoint.py import's)")
    p.add_argument("--tokenise-mb", type=float, default=100, help="input size of the tokenisation rows")
    p.add_argument("--sizes", default="100,1000", help="end-to-end input sizes, MB")
    p.add_argument("--index-lines", default="1000000,10000000,100000000")
    p.add_argument("--loader-seconds", type=float, default=20)
    p.add_argument("--workdir", default="/tmp/bench_data")
    p.add_argument("--keep", action="store_true", help="keep the workdir")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    rows = []
    valid = sized_copy(a.text, 1, a.workdir)
    spm_dir = os.path.join(a.workdir, "spm")
    if not os.path.isfile(os.path.join(spm_dir, "spm.model")):  # one sentencepiece model for every row
        run_engine(a.workdir, "spm", valid, valid, ["--vocab-size", "8000"], 1)
    tokenizers = {"WordPiece": ["--wordpiece-vocab", a.wordpiece_vocab],
                  "sentencepiece": ["--spm-model", os.path.join(spm_dir, "spm.model")]}

    text = sized_copy(a.text, a.tokenise_mb, a.workdir)
    for name, tok in tokenizers.items():
        for workers in (1, 2):
            r = run_engine(a.workdir, "tok", text, valid, tok, workers)
            rows.append((f"tokenise {name}, {workers} worker(s)", f"{r['mb']:.0f} MB",
                         f"{r['tok'] / workers:.2f} MB/s per worker ({r['tok']:.2f} total)", ""))
            if workers == 1:
                rows.append((f"write the data-bin ({name} ids)", f"{r['mb']:.0f} MB", f"{r['write']:.1f} MB/s", ""))
    for mb in [float(x) for x in a.sizes.split(",") if x]:
        text = sized_copy(a.text, mb, a.workdir)
        for name, tok in tokenizers.items():
            r = run_engine(a.workdir, "e2e", text, valid, tok, 2)
            rows.append((f"end to end, {name}, 2 workers", f"{r['mb']:.0f} MB", f"{r['e2e']:.2f} MB/s "
                         f"({r['total']:.0f} s)", f"{r['rss']:,.0f} MB + {r['worker_rss']:,.0f} MB a worker"))
    e2e_data = os.path.join(a.workdir, "e2e")

    index_lines = [int(float(x)) for x in a.index_lines.split(",") if x]
    for lines in index_lines:
        prefix = synthetic_databin(os.path.join(a.workdir, f"synthetic{lines}"), lines)
        n, seconds, peak, examples = index_row(prefix, "new")
        rows.append((f"example index, {examples:,} examples", f"{n / 1e6:g}M lines",
                     f"{seconds:.2f} s ({seconds / n * 1e6:.3f} us/line)", f"{peak / n:.1f} B/line"))
    if index_lines:
        prefix = os.path.join(a.workdir, f"synthetic{index_lines[0]}")
        n, seconds, peak, examples = index_row(prefix, "old")
        rows.append((f"example index, old Python packing, {examples:,} examples", f"{n / 1e6:g}M lines",
                     f"{seconds:.2f} s ({seconds / n * 1e6:.3f} us/line)", f"{peak / n:.1f} B/line"))
    if os.path.isdir(e2e_data):
        for workers in (0, 1, 2):
            eps = loader_row(e2e_data, workers, a.loader_seconds)
            rows.append((f"loader, --num-workers {workers} (512-token examples, batch 16)", "",
                         f"{eps:,.0f} examples/s", ""))

    print("| step | input | speed | peak memory |")
    print("|---|---|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if not a.keep:
        shutil.rmtree(a.workdir, ignore_errors=True)


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"\nbench_data: {time.time() - t0:.0f} s", file=sys.stderr)
