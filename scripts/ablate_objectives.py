#!/usr/bin/env python
"""The paper's objective ablation (Table 6) on your data: every objective x seed is pre-trained
with the same updates, batch, lr and schedule, fine-tuned with the same settings, decoded and
scored; then one table, a JSON file and a plot. Run through ``scripts/ablate_objectives.sh``,
which documents the flags (this file takes the same ones, plus ``--device-flags``). Here the runs;
the checks of what they are given and the report of their results: ``scripts/ablation/``.

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

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the imports below, one line

with interruptible("ablate_objectives.sh"):
    from ablation.inputs import (
        OBJECTIVES,
        Failure,
        check_inputs,
        check_settings,
        claim_out,
        objectives_of,
        read_json,
        seeds_of,
        settings_of,
        write_json,
    )
    from ablation.report import collect, plot, plot_curves, table  # scripts/ is on sys.path: the script's own folder

    from fairseq_pmlm.errors import report_error
    from fairseq_pmlm.scoring.rouge import rouge_per_example
    from fairseq_pmlm.text.lines import read_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "ablate_objectives.sh"


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, as every recipe's bad command line (--help: the .sh's header)
        m = re.fullmatch(r"argument (--[\w-]+): expected one argument", message)
        raise Failure(f"{m.group(1)} needs a value" if m else message)


def positive_int(text):
    if not re.fullmatch(r"[1-9][0-9]*", text):
        raise argparse.ArgumentTypeError(f"must be a positive integer: {text}")
    return int(text)


def parse(argv):
    p = Parser(prog=PROG, add_help=False)
    p.add_argument("--pretrain-data", required=True)
    p.add_argument("--pairs", required=True)
    p.add_argument("--refs", required=True)
    p.add_argument("--init", required=True, help="a checkpoint, or 'random'")
    p.add_argument("--arch", default="")
    p.add_argument("--objectives", default=",".join(OBJECTIVES))
    p.add_argument("--updates", type=positive_int, default=200)
    p.add_argument("--ft-updates", type=positive_int, default=400)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--lanes", type=positive_int)
    p.add_argument("--default-lanes", type=positive_int, default=2, help=argparse.SUPPRESS)  # the .sh's, by device
    p.add_argument("--out", required=True)
    p.add_argument("--preset", default="demo")
    p.add_argument("--lr", default="3e-4")
    p.add_argument("--tokens-per-sample", type=positive_int, default=128)
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--ft-flags", default="--dropout 0 --attention-dropout 0")
    p.add_argument("--device-flags", default="--cpu")
    p.add_argument("extra", nargs="*", help="fairseq-train flags for every pre-training run")
    a = p.parse_args(argv)
    a.lanes = a.lanes or a.default_lanes
    return a


# ----------------------------------------------------------------------------- running
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
    # the one pre-training recipe, the main job's too (scripts/pretrain.sh)
    cmd = ["bash", os.path.join(ROOT, "scripts", "pretrain.sh"), "--data", a.pretrain_data, "--save-dir", save,
           "--init", a.init, "--objective", obj, "--updates", str(n), "--lr", a.lr,
           "--tokens-per-sample", str(a.tokens_per_sample), "--batch-size", str(a.batch_size), "--seed", str(seed),
           "--", *(["--arch", a.arch] if a.init == "random" else []), *shlex.split(a.device_flags), *a.extra]
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
    try:
        a = parse(argv)
        objectives, seeds = objectives_of(a.objectives), seeds_of(a.seeds)
        check_inputs(a, objectives)
        check_settings(a, objectives, ROOT)
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
