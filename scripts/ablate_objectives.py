#!/usr/bin/env python
"""The paper's objective ablation (Table 6) on your data: every objective x seed is pre-trained
with the same updates, batch, lr and schedule, fine-tuned with the same settings, decoded and
scored; then one table, a JSON file and a plot. Run through ``scripts/ablate_objectives.sh``,
which documents the flags (this file takes the same ones, plus ``--device-flags``).

Layout of OUT (a run is one objective and one seed; ``none`` skips pre-training)::

    OUT/settings.json                      the settings: a re-run with others is refused
    OUT/runs/ae+par-seed1/pretrain/        fairseq-train save dir, train.log, done.json (cost)
    OUT/runs/ae+par-seed1/finetune/        s2s/finetune.sh save dir, train.log, done.json
    OUT/runs/ae+par-seed1/generate/        s2s/generate.sh output (hyp.txt), rouge.json (per example)
    OUT/table.md, OUT/results.json, OUT/rougeL.png, OUT/pretrain_curves.png

Each stage writes its done.json / rouge.json last, so a stage without one is run (again) by the
next invocation: fairseq-train resumes its own checkpoint_last.pt, finetune.sh resumes its save dir.
"""
import argparse
import glob
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from fairseq_pmlm.data.databin.writer import index_items
from fairseq_pmlm.data.pmlm_dictionary import load_pmlm_dictionary
from fairseq_pmlm.errors import OneLineError, report_error
from fairseq_pmlm.models.unilmv2 import dictionary_digest, dictionary_misfit
from fairseq_pmlm.objectives import NAMES, objective
from fairseq_pmlm.scoring.rouge import rouge_per_example
from fairseq_pmlm.scoring.score_files import paired_bootstrap
from fairseq_pmlm.text.lines import count_lines, read_lines
from fairseq_pmlm.weights.checkpoint import flags_of_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "ablate_objectives.sh"
OBJECTIVES = ("none", *NAMES)  # the paper's Table 6 rows, plus no pre-training
BOOTSTRAP_RESAMPLES = 1000


class Failure(OneLineError):
    """A one-line error: printed as ``ablate_objectives.sh: error: ...``, exit status 2."""


def parse(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--pretrain-data", required=True)
    p.add_argument("--pairs", required=True)
    p.add_argument("--refs", required=True)
    p.add_argument("--init", required=True, help="a checkpoint, or 'random'")
    p.add_argument("--arch", default="")
    p.add_argument("--objectives", default=",".join(OBJECTIVES))
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--ft-updates", type=int, default=400)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--lanes", type=int, default=2)
    p.add_argument("--out", required=True)
    p.add_argument("--preset", default="demo")
    p.add_argument("--lr", default="3e-4")
    p.add_argument("--tokens-per-sample", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--ft-flags", default="--dropout 0 --attention-dropout 0")
    p.add_argument("--device-flags", default="--cpu")
    p.add_argument("extra", nargs="*", help="fairseq-train flags for every pre-training run")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- checks
def objectives_of(text):
    names = [o.strip() for o in text.split(",") if o.strip()]
    for o in names:
        if o not in OBJECTIVES:
            raise Failure(f"--objectives: unknown objective {o!r} (known: {', '.join(OBJECTIVES)})")
    if len(set(names)) != len(names) or not names:
        raise Failure(f"--objectives {text!r}: name each objective once")
    return names


def seeds_of(text):
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise Failure(f"--seeds {text!r}: a comma-separated list of integers, e.g. 1,2,3") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise Failure(f"--seeds {text!r}: name each seed once")
    return seeds


def read_symbols(path):
    with open(path, encoding="utf-8") as f:
        return [line.rsplit(" ", 1)[0] for line in f]


def check_inputs(a, objectives):
    """Every input the runs read, before the first run starts: one line for the first problem."""
    for flag, n in (("--updates", a.updates), ("--ft-updates", a.ft_updates), ("--lanes", a.lanes)):
        if n < 1:
            raise Failure(f"{flag} must be a positive integer, not {n}")
    pre, pairs = a.pretrain_data, a.pairs
    for f in ("dict.txt", "train.idx", "train.bin", "valid.idx"):
        if any(o != "none" for o in objectives) and not os.path.isfile(os.path.join(pre, f)):
            raise Failure(f"--pretrain-data {pre}: no {f} (a data-bin of scripts/prepare_data.sh)")
    if not os.path.isfile(os.path.join(pre, "dict.txt")):
        raise Failure(f"--pretrain-data {pre}: no dict.txt (a data-bin of scripts/prepare_data.sh)")
    for f in ("dict.source.txt", "train.source-target.source.idx", "test.source-target.source.idx"):
        if not os.path.isfile(os.path.join(pairs, f)):
            raise Failure(f"--pairs {pairs}: no {f} (a data-bin of scripts/s2s/prepare.sh)")
    if read_symbols(os.path.join(pre, "dict.txt")) != read_symbols(os.path.join(pairs, "dict.source.txt")):
        raise Failure(f"--pretrain-data {pre}/dict.txt and --pairs {pairs}/dict.source.txt are different "
                      f"dictionaries: prepare the pairs with scripts/s2s/prepare.sh --pretrain-data {pre}")
    try:
        if float(a.lr) <= 0:
            raise ValueError
    except ValueError:
        raise Failure(f"--lr must be a positive number, not {a.lr!r}") from None
    for flag, text in (("--ft-flags", a.ft_flags), ("--device-flags", a.device_flags)):
        try:
            shlex.split(text)
        except ValueError as e:
            raise Failure(f"{flag} {text!r}: {e}") from None
    if not os.path.isfile(a.refs):
        raise Failure(f"--refs {a.refs}: no such file")

    tests = index_items(os.path.join(pairs, "test.source-target.source.idx"))
    lines = count_lines(a.refs)  # as generate.sh and score.py count them
    if lines != tests:
        raise Failure(f"--refs {a.refs} has {lines} lines but {pairs} holds {tests} test pairs")
    if a.init == "random":
        if not a.arch:
            raise Failure("--init random needs --arch (e.g. unilmv2_small)")
        return
    if a.arch:
        raise Failure("--arch goes with --init random only (a checkpoint brings its own)")
    if not os.path.isfile(a.init):
        raise Failure(f"--init {a.init}: no such file (a checkpoint, or 'random')")
    mismatch = dictionary_mismatch(a.init, os.path.join(pre, "dict.txt"))
    if mismatch:
        raise Failure(mismatch)


def dictionary_mismatch(checkpoint, dict_file):
    """The one line saying that ``checkpoint`` was trained with another dictionary, or None."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
        weights = state["model"]
    except Exception as e:  # noqa: BLE001  (any unreadable file: one line naming it)
        return f"--init {checkpoint}: cannot read it ({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"
    logging.disable(logging.INFO)  # the task's note on the dictionary: the runs print it
    dictionary = load_pmlm_dictionary(os.path.dirname(dict_file))
    logging.disable(logging.NOTSET)
    misfit = dictionary_misfit(weights, dictionary_digest(dictionary), len(dictionary))
    if misfit:
        return (f"--init {checkpoint} was trained with another dictionary than {dict_file} + [MASK] + [P] ({misfit}): "
                "a checkpoint of another dictionary (binarize with its dict.txt)")
    return None


def settings_of(a, objectives, seeds):
    """What makes two invocations the same experiment (objectives and seeds may grow)."""
    return {"pretrain_data": os.path.abspath(a.pretrain_data), "pairs": os.path.abspath(a.pairs),
            "refs": os.path.abspath(a.refs), "init": a.init if a.init == "random" else os.path.abspath(a.init),
            "arch": a.arch, "updates": a.updates, "ft_updates": a.ft_updates, "preset": a.preset, "lr": a.lr,
            "tokens_per_sample": a.tokens_per_sample, "batch_size": a.batch_size, "ft_flags": a.ft_flags,
            "extra": a.extra}


def claim_out(a, settings):
    """OUT/settings.json: written on the first invocation, compared on the next ones."""
    path = os.path.join(a.out, "settings.json")
    if os.path.isfile(path):
        with open(path) as f:
            old = json.load(f)
        changed = [k for k in settings if old.get(k) != settings[k]]
        if changed:
            raise Failure(f"--out {a.out} holds runs made with other settings ({', '.join(changed)}): "
                          f"re-run the same command to resume, or pick another --out")
        return
    if os.path.isdir(a.out) and os.listdir(a.out):
        raise Failure(f"--out {a.out} exists and holds no ablation (no settings.json): pick another --out")
    os.makedirs(a.out, exist_ok=True)
    write_json(path, settings)


# ----------------------------------------------------------------------------- running
def write_json(path, obj):
    """Written whole or not at all: a kill never leaves half a marker behind."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def read_json(path):
    with open(path) as f:
        return json.load(f)


class Progress:
    """Progress lines, one at a time from the lanes: [mm:ss] and the run's name."""

    def __init__(self, total):
        self.start, self.total, self.done, self.lock = time.time(), total, 0, threading.Lock()
        self.ran = 0  # runs that did work in this invocation: the time left is estimated from them

    def say(self, text):
        t = int(time.time() - self.start)
        with self.lock:
            print(f"[{t // 60}:{t % 60:02d}] {text}", flush=True)

    def finished(self, name, ran):
        with self.lock:
            self.done += 1
            self.ran += ran
            done, total, runs = self.done, self.total, self.ran
        t = time.time() - self.start
        eta = f", about {int(t / runs * (total - done) / 60)} min left" if runs and done < total else ""
        self.say(f"{name}: {'done' if ran else 'done before'} ({done}/{total} runs{eta})")


CHILDREN = set()
STOPPING = threading.Event()


def run_logged(cmd, log, name, progress, env):
    """cmd with its output appended to ``log``; fairseq's progress records shown, shortened."""
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n### {shlex.join(cmd)}\n")
        out.flush()
        # started with SIGINT ignored, as bash starts a recipe's steps (scripts/lib/common.sh): Ctrl-C
        # reaches this driver alone, which passes it on as SIGTERM, so fairseq-train saves and stops
        # (a SIGINT of its own would end it with a KeyboardInterrupt, unsaved)
        proc = subprocess.Popen(["sh", "-c", 'trap "" INT; exec "$@"', "sh", *cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        CHILDREN.add(proc)
        try:
            for line in proc.stdout:
                out.write(line)
                m = re.search(r"\| (train_inner|valid) \| (\{.*\})", line)
                if m:
                    rec = json.loads(m.group(2))
                    keys = ("num_updates", "loss", "ae_loss", "par_loss", "nll_loss", "ae_acc", "par_acc",
                            "accuracy") if m.group(1) == "train_inner" else ("valid_num_updates", "valid_loss",
                                                                              "valid_ae_loss", "valid_par_loss")
                    shown = ", ".join(f"{k.removeprefix('valid_')} {rec[k]}" for k in keys if k in rec)
                    progress.say(f"{name}: {m.group(1).replace('_inner', '')}: {shown}")
            rc = proc.wait()
        finally:
            CHILDREN.discard(proc)
    if rc != 0:
        if STOPPING.is_set():
            raise Failure("stopped; the same command resumes")
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.readlines()[-15:]
        sys.stderr.write("".join(tail))
        raise Failure(f"{name} failed (exit {rc}); the end of {log} is above")


def last_record(log, tag):
    """The last json record of fairseq's log tagged ``tag`` (``train``, ``valid``), or {}."""
    found = {}
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if f"| {tag} | {{" in line:
                found = json.loads(line.split(f"| {tag} | ", 1)[1])
    return found


def pretrain(a, obj, seed, run_dir, progress, env):
    """fairseq-train --objective OBJ: the same flags for every objective; done.json: its cost."""
    save = os.path.join(run_dir, "pretrain")
    done = os.path.join(save, "done.json")
    if os.path.isfile(done):
        return read_json(done)
    os.makedirs(save, exist_ok=True)
    n = a.updates
    model = ["--arch", a.arch] if a.init == "random" else flags_of_checkpoint(a.init) + ["--finetune-from-model",
                                                                              os.path.abspath(a.init)]
    cmd = ["fairseq-train", a.pretrain_data, "--user-dir", os.path.join(ROOT, "fairseq_pmlm"),
           "--task", "pseudo_masked_lm", "--criterion", "pmlm", "--objective", obj, *model,
           "--tokens-per-sample", str(a.tokens_per_sample), "--batch-size", str(a.batch_size),
           "--max-tokens", "1000000",
           "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01",
           "--lr", a.lr, "--lr-scheduler", "polynomial_decay", "--warmup-updates", str(max(1, n // 10)),
           "--total-num-update", str(n), "--max-update", str(n), "--dropout", "0.1", "--attention-dropout", "0.1",
           "--seed", str(seed), "--log-format", "json", "--log-interval", str(max(1, n // 10)),
           "--validate-interval-updates", str(max(1, n // 10)), "--max-valid-steps", "10",
           "--save-dir", save, "--no-epoch-checkpoints", "--save-interval-updates", str(max(1, n // 4)),
           "--keep-interval-updates", "1", *shlex.split(a.device_flags), *a.extra]
    name = f"{obj}/seed {seed}: pre-training"
    progress.say(f"{name}: {n} updates of {a.batch_size} x {a.tokens_per_sample} tokens, lr {a.lr}")
    log = os.path.join(save, "train.log")
    t0 = time.time()
    run_logged(cmd, log, name, progress, env)
    train, valid = last_record(log, "train"), last_record(log, "valid")
    updates = int(float(train.get("train_num_updates", n)))
    wpb, wps = float(train.get("train_wpb", 0)), float(train.get("train_wps", 0))
    # tokens an update over tokens a second: the time of an update, start-up and validation left out
    cost = {"objective": obj, "seed": seed, "updates": updates,
            "seconds_per_update": wpb / wps if wps else (time.time() - t0) / max(updates, 1),
            "tokens_per_update": wpb, "tokens": wpb * updates,
            "valid": {k.removeprefix("valid_"): float(v) for k, v in valid.items() if "loss" in k or "acc" in k}}
    write_json(done, cost)
    for path in glob.glob(os.path.join(glob.escape(save), "checkpoint*.pt")):  # keep checkpoint_last.pt alone
        if os.path.basename(path) != "checkpoint_last.pt":
            os.remove(path)
    progress.say(f"{name}: {cost['seconds_per_update']:.2f} s and {cost['tokens_per_update']:.0f} tokens an update")
    return cost


def finetune(a, obj, seed, run_dir, progress, env):
    save = os.path.join(run_dir, "finetune")
    done = os.path.join(save, "done.json")
    if os.path.isfile(done):
        return
    os.makedirs(save, exist_ok=True)
    if obj != "none":
        init = os.path.join(run_dir, "pretrain", "checkpoint_last.pt")
    else:
        init = "none" if a.init == "random" else a.init
    more = ["--arch", a.arch] if init == "none" else []
    cmd = ["bash", os.path.join(ROOT, "scripts/s2s/finetune.sh"), "--preset", a.preset, "--data", a.pairs,
           "--checkpoint", init, "--save-dir", save, "--updates", str(a.ft_updates), "--", *more,
           *shlex.split(a.ft_flags), "--seed", str(seed), "--disable-validation",
           "--log-interval", str(max(1, a.ft_updates // 4)), *shlex.split(a.device_flags)]
    name = f"{obj}/seed {seed}: fine-tuning"
    progress.say(f"{name}: {a.ft_updates} updates (preset {a.preset}), from {init}")
    run_logged(cmd, os.path.join(save, "train.log"), name, progress, env)
    write_json(done, {"init": init, "updates": a.ft_updates})


def generate(a, obj, seed, run_dir, progress, env):
    out = os.path.join(run_dir, "generate")
    scores = os.path.join(out, "rouge.json")
    if os.path.isfile(scores):
        return read_json(scores)
    cmd = ["bash", os.path.join(ROOT, "scripts/s2s/generate.sh"), "--preset", a.preset, "--data", a.pairs,
           "--checkpoint", os.path.join(run_dir, "finetune", "checkpoint_last.pt"), "--refs", a.refs,
           "--out-dir", out, "--", *shlex.split(a.device_flags)]
    name = f"{obj}/seed {seed}: decoding"
    os.makedirs(out, exist_ok=True)
    run_logged(cmd, os.path.join(run_dir, "generate.log"), name, progress, env)

    logging.getLogger("absl").setLevel(logging.WARNING)  # rouge-score's "Using default tokenizer."
    refs, hyps = read_lines(a.refs), read_lines(os.path.join(out, "hyp.txt"))
    per = rouge_per_example(refs, hyps)
    write_json(scores, per)
    progress.say(f"{name}: ROUGE-L {sum(per['rougeL']) / len(per['rougeL']):.2f}")
    return per


def one_run(a, obj, seed, progress, env):
    if STOPPING.is_set():
        return
    run_dir = os.path.join(a.out, "runs", f"{obj}-seed{seed}")
    ran = not os.path.isfile(os.path.join(run_dir, "generate", "rouge.json"))
    if obj != "none":
        pretrain(a, obj, seed, run_dir, progress, env)
    finetune(a, obj, seed, run_dir, progress, env)
    generate(a, obj, seed, run_dir, progress, env)
    progress.finished(f"{obj}/seed {seed}", ran)


# ----------------------------------------------------------------------------- results
def collect(a, objectives, seeds):
    """results.json's content from the runs' files."""
    per, cost = {}, {}
    for obj in objectives:
        for seed in seeds:
            run_dir = os.path.join(a.out, "runs", f"{obj}-seed{seed}")
            per[obj, seed] = read_json(os.path.join(run_dir, "generate", "rouge.json"))
            if obj != "none":
                cost[obj, seed] = read_json(os.path.join(run_dir, "pretrain", "done.json"))

    def vs(obj, base):
        if base not in objectives or obj == base:
            return None
        d, lo, hi = paired_bootstrap([per[obj, s]["rougeL"] for s in seeds], [per[base, s]["rougeL"] for s in seeds],
                                     resamples=BOOTSTRAP_RESAMPLES)
        return {"rougeL_diff": round(d, 3), "ci95": [round(lo, 3), round(hi, 3)]}

    def mean_cost(obj, key):
        return float(np.mean([cost[obj, s][key] for s in seeds])) if obj != "none" else 0.0

    rows = []
    for obj in objectives:
        row = {"objective": obj, "seeds": seeds}
        for t in ("rouge1", "rouge2", "rougeL"):
            row[t] = [round(float(np.mean(per[obj, s][t])), 3) for s in seeds]
        row["rougeL_mean"] = round(float(np.mean(row["rougeL"])), 3)
        row["vs_ae"], row["vs_none"] = vs(obj, "ae"), vs(obj, "none")
        row["seconds_per_update"] = round(mean_cost(obj, "seconds_per_update"), 4)
        row["tokens_per_update"] = round(mean_cost(obj, "tokens_per_update"), 1)
        row["pretrain_tokens"] = [cost[obj, s]["tokens"] for s in seeds] if obj != "none" else [0] * len(seeds)
        row["valid"] = [cost[obj, s]["valid"] for s in seeds] if obj != "none" else []
        rows.append(row)
    ae_cost = mean_cost("ae", "seconds_per_update") if "ae" in objectives else 0
    for row in rows:
        row["cost_per_update_vs_ae"] = round(row["seconds_per_update"] / ae_cost, 3) if ae_cost else None
    return {"settings": settings_of(a, objectives, seeds), "test_examples": len(per[objectives[0], seeds[0]]["rougeL"]),
            "objectives": rows}


def spread(values):
    return f"{sum(values) / len(values):.2f} ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 \
        else f"{values[0]:.2f}"


def interval(v):
    if v is None:
        return ""
    d, (lo, hi) = v["rougeL_diff"], v["ci95"]
    return f"{d:+.2f} ({lo:+.2f} to {hi:+.2f}){'' if lo <= 0 <= hi else ' *'}"


def table(results):
    rows = results["objectives"]
    n, seeds = results["test_examples"], rows[0]["seeds"]
    lines = [f"ROUGE F1 (%) on {n} test examples: mean over seeds {','.join(map(str, seeds))} (lowest-highest "
             f"seed); differences pooled over the seeds with a 95% paired bootstrap interval over the examples "
             f"(* : the interval excludes 0); cost: pre-training seconds per update relative to ae; tokens: "
             f"input tokens per pre-training update (context + appended part).", "",
             "| objective | ROUGE-1 | ROUGE-2 | ROUGE-L | ROUGE-L vs ae | ROUGE-L vs none | cost / update vs ae "
             "| tokens / update |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cost, tokens = ("no pre-training", "") if r["objective"] == "none" else (
            f"{r['cost_per_update_vs_ae']:.2f}" if r["cost_per_update_vs_ae"] else f"{r['seconds_per_update']:.2f} s",
            f"{r['tokens_per_update']:.0f}")
        lines.append(f"| {r['objective']} | {spread(r['rouge1'])} | {spread(r['rouge2'])} | {spread(r['rougeL'])} | "
                     f"{interval(r['vs_ae'])} | {interval(r['vs_none'])} | {cost} | {tokens} |")
    return "\n".join(lines) + "\n"


def plot(results, path):
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # fairseq's import set the root logger to DEBUG
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["objectives"]
    fig, ax = plt.subplots(figsize=(1.2 * len(rows) + 2, 3.6))
    for x, r in enumerate(rows):
        ax.scatter([x] * len(r["rougeL"]), r["rougeL"], color="tab:blue", s=18, zorder=3)
        ax.hlines(r["rougeL_mean"], x - 0.25, x + 0.25, color="black")
    ax.set_xticks(range(len(rows)), [r["objective"] for r in rows])
    ax.set_ylabel("ROUGE-L F1 (%)")
    ax.set_title(f"fine-tuned after each pre-training objective (dots: seeds; bar: mean; "
                 f"{results['test_examples']} test examples)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


def plot_curves(a, objectives, seeds, path):
    """Held-out loss of the pre-training runs (the AE part where the objective has one, else PAR)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for k, obj in enumerate(o for o in objectives if o != "none"):
        for seed in seeds:
            log = os.path.join(a.out, "runs", f"{obj}-seed{seed}", "pretrain", "train.log")
            points = []
            with open(log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if "| valid | {" in line:
                        r = json.loads(line.split("| valid | ", 1)[1])
                        key = f"valid_{objective(obj).loss_parts[0]}_loss"
                        points.append((int(float(r["valid_num_updates"])), float(r[key])))
            points.sort()
            ax.plot(*zip(*points), color=f"C{k}", alpha=0.7, label=obj if seed == seeds[0] else None,
                    marker=".") if points else None
    ax.set_xlabel("pre-training update")
    ax.set_ylabel("held-out loss (bits a masked token)")
    ax.set_title("pre-training: AE loss (objectives with AE), else PAR loss", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


# ----------------------------------------------------------------------------- main
STOPPED_BY = []  # the signal that stopped the runs: the exit status is 128 + its number


def stop(signum, frame):
    """SIGTERM/SIGINT: every running step is passed SIGTERM (fairseq-train saves checkpoint_last.pt
    and stops; the recipes pass it on to theirs); no new step starts; the same command resumes."""
    STOPPED_BY.append(signum)
    STOPPING.set()
    for proc in list(CHILDREN):
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass


def main(argv=None):
    a = parse(argv)
    try:
        objectives, seeds = objectives_of(a.objectives), seeds_of(a.seeds)
        check_inputs(a, objectives)
        claim_out(a, settings_of(a, objectives, seeds))
    except Failure as e:
        return report_error(PROG, e)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if a.lanes > 1:  # one thread a lane: small models run faster as single-threaded runs side by side
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // a.lanes))
    runs = [(obj, seed) for seed in seeds for obj in objectives]
    progress = Progress(len(runs))
    progress.say(f"{len(objectives)} objectives x {len(seeds)} seeds = {len(runs)} runs in {a.lanes} lane(s); "
                 f"pre-training {a.updates} updates, fine-tuning {a.ft_updates}; {a.out}")
    errors = []
    with ThreadPoolExecutor(max_workers=a.lanes) as pool:
        futures = [pool.submit(one_run, a, obj, seed, progress, env) for obj, seed in runs]
        for fut in futures:
            try:
                fut.result()
            except Failure as e:
                errors.append(str(e))
                STOPPING.set()  # no new run starts; the running ones finish their step
    if STOPPED_BY:  # Ctrl-C or SIGTERM: 130 or 143, as every recipe (a step's "stopped" is no error)
        print(f"{PROG}: stopped ({signal.Signals(STOPPED_BY[0]).name}): each running step saved; the same command "
              "resumes", file=sys.stderr)
        return 128 + STOPPED_BY[0]
    if errors:
        return report_error(PROG, errors[0])
    results = collect(a, objectives, seeds)
    write_json(os.path.join(a.out, "results.json"), results)
    text = table(results)
    with open(os.path.join(a.out, "table.md.tmp"), "w") as f:
        f.write(text)
    os.replace(os.path.join(a.out, "table.md.tmp"), os.path.join(a.out, "table.md"))
    plot(results, os.path.join(a.out, "rougeL.png"))
    if any(o != "none" for o in objectives):
        plot_curves(a, objectives, seeds, os.path.join(a.out, "pretrain_curves.png"))
    print(text)
    print(f"{a.out}/table.md, results.json, rougeL.png, pretrain_curves.png; wall time "
          f"{int(time.time() - progress.start)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
