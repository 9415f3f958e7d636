#!/usr/bin/env python
"""What a change gave: the same pre-training rows measured on several trees of this repository in
turn, in one call, each tree against the first on the same machine. On a GPU two machines differ
by more than most changes do (roberta_base's unchanged update took 54.9 and 68.5 ms on two H200s),
so a before/after read off two calls' tables says little.

Each TREE is a directory holding a copy of this repository, or a git revision (exported by
``git archive`` into a temporary directory). A tree's rows run in a process of their own that
imports that tree's plugin and its own ``scripts/bench_gpu.py`` (sizes, flags) and times one
fairseq ``Trainer.train_step`` per update as that file's rows do; the trees alternate within a
round, in reverse order every other round. A cell is the median of the rounds (each round's time
after it), and each tree's ratio is the first tree's time over its own (above 1: faster).

    python scripts/bench_trees.py [--rounds 2] [--rows ae+par-fp16,ae+par-bf16,ae-fp16] [--smoke] TREE...

Worked example, on a GPU machine set up by ``bash scripts/bench_gpu.sh --wheels DIR``:
    .venv/bin/python scripts/bench_trees.py --rounds 3 HEAD~2 HEAD~1 .
``--smoke``: tiny sizes on the CPU (the tests run it)."""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = {  # name: (objective, precision as in bench_gpu.common_args)
    "ae+par-fp16": ("ae+par", "fp16"),
    "ae+par-bf16": ("ae+par", "bf16 autocast"),
    "ae-fp16": ("ae", "fp16"),
}


def child(tree, rows, smoke):
    """In the tree's own process: its plugin and bench code; prints one JSON line."""
    sys.path[:0] = [tree, os.path.join(tree, "scripts")]
    import bench_gpu
    import bench_pretrain
    import torch

    import fairseq_pmlm

    plugin = os.path.dirname(os.path.abspath(fairseq_pmlm.__file__))
    if not plugin.startswith(tree + os.sep):
        sys.exit(f"bench_trees.py: error: {tree}: its process imported the plugin from {plugin}")
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    s = bench_gpu.SIZES["smoke" if smoke else "base"]
    work = tempfile.mkdtemp(prefix="bench_trees_")
    try:
        data = bench_pretrain.binarize(work, vocab=s["vocab"], docs=s["docs"])
        common, precision = bench_gpu.common_args(s, data, device)
        ms = {}
        for name in rows:
            objective, dtype = ROWS[name]
            task, trainer = bench_pretrain.setup(common + bench_gpu.pmlm_args(objective) + precision[dtype])
            batch = bench_pretrain.full_length_batch(task.dataset("train"), s["batch"], s["length"])
            ms[name] = 1000 * bench_pretrain.time_updates(trainer, batch, s["warmup"], s["steps"])
            del trainer, task
            if device == "cuda":
                torch.cuda.empty_cache()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"ms": ms, "plugin": plugin, "device": device}))


def export(rev, into):
    """The tree of git revision ``rev`` of this repository, written under ``into``; None if ``rev``
    is no revision here."""
    repo = os.path.dirname(HERE)
    found = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        return None
    commit = found.stdout.strip()
    path = tempfile.mkdtemp(prefix=f"{commit[:10]}_", dir=into)  # one each: a revision twice is an A/A run
    archive = subprocess.Popen(["git", "-C", repo, "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", path], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        sys.exit(f"bench_trees.py: error: git archive {rev} failed")
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="+", metavar="TREE", help="a directory holding a copy of this repository, or a "
                                                            "git revision; the first is the reference")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of: {', '.join(ROWS)}")
    p.add_argument("--smoke", action="store_true", help="tiny sizes (the CPU)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    rows = a.rows.split(",")
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        p.error(f"--rows: unknown {', '.join(unknown)} (known: {', '.join(ROWS)})")
    if a.child:
        return child(a.trees[0], rows, a.smoke)
    if a.rounds < 1:
        p.error(f"--rounds must be at least 1, got {a.rounds}")
    exported = tempfile.mkdtemp(prefix="bench_trees_src_")
    try:
        paths = []
        for tree in a.trees:
            path = os.path.abspath(tree) if os.path.isdir(tree) else export(tree, exported)
            if path is None:
                p.error(f"{tree}: neither a directory nor a git revision of this repository")
            if not os.path.isfile(os.path.join(path, "scripts", "bench_gpu.py")):
                p.error(f"{tree}: has no scripts/bench_gpu.py (not a copy of this repository, or older than it)")
            paths.append(path)
        results = {i: [] for i in range(len(paths))}
        for r in range(a.rounds):
            order = range(len(paths)) if r % 2 == 0 else reversed(range(len(paths)))
            for i in order:
                cmd = [sys.executable, os.path.abspath(__file__), "--child", paths[i], "--rows", ",".join(rows)]
                env = dict(os.environ, PYTHONPATH=paths[i])
                proc = subprocess.run(cmd + (["--smoke"] if a.smoke else []), capture_output=True, text=True, env=env)
                if proc.returncode in (130, -signal.SIGINT, -signal.SIGTERM):  # Ctrl-C reached the group
                    raise KeyboardInterrupt
                if proc.returncode != 0:
                    sys.stderr.write(proc.stderr[-3000:])
                    sys.exit(f"bench_trees.py: error: {a.trees[i]}: its rows failed (its output above)")
                out = json.loads(proc.stdout.strip().splitlines()[-1])
                results[i].append(out)
                print(f"bench_trees: round {r + 1} of {a.rounds}, {a.trees[i]}: "
                      + ", ".join(f"{k} {v:.1f} ms" for k, v in out["ms"].items()), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(exported, ignore_errors=True)
    print(table(a.trees, results, rows, a.rounds, results[0][0]["device"]))


def table(trees, results, rows, rounds, device):
    """Markdown: a row per measured row, a column per tree: median ms (the rounds) and x the first's."""
    lines = [f"update ms on {device}, median of {rounds} round(s) (each round's time after it); x: the first "
             "tree's time over this one's (above 1: faster)", "",
             "| row | " + " | ".join(trees) + " |", "|---|" + "---:|" * len(trees)]
    for name in rows:
        first = statistics.median(o["ms"][name] for o in results[0])
        cells = []
        for i in range(len(trees)):
            times = [o["ms"][name] for o in results[i]]
            mid = statistics.median(times)
            cell = f"{mid:.1f} ({' / '.join(f'{t:.1f}' for t in times)})"
            cells.append(cell if i == 0 else f"{cell}: {first / mid:.2f}x")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM as Ctrl-C: the same clean way out
    try:
        main()
    except KeyboardInterrupt:  # the exported trees are removed on the way out (main's finally)
        print("bench_trees.py: interrupted", file=sys.stderr)
        sys.exit(130)
