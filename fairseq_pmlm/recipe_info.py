"""Facts the shell recipes need, printed one per line; errors are one line and exit status 2.

    python scripts/recipe_info.py bpe-flags DIR          # fairseq --bpe flags of DIR's tokenizer
    python scripts/recipe_info.py model-flags CKPT       # --arch and model flags of a checkpoint
    python scripts/recipe_info.py copy-tokenizer SRC DEST
    python scripts/recipe_info.py schedule --examples N|--items PREFIX.idx --batch B --epochs E --warmup-ratio R
                                           [--updates U] # "UPDATES WARMUP_UPDATES"
    python scripts/recipe_info.py glue-meta DIR          # "TASK TRAIN_EXAMPLES METRIC NUM_CLASSES"
    python scripts/recipe_info.py glue-report LOG TASK METRIC   # the best dev epoch of a GLUE run
    python scripts/recipe_info.py gpus                   # the GPUs torch can use
    python scripts/recipe_info.py count-items PREFIX.idx # items of a binarized split (its mmap index header)
    python scripts/recipe_info.py separator DIR          # the dict symbol carrying [X_SEP] in DIR ("" if none)
    python scripts/recipe_info.py run-of CHECKPOINT      # "TASK UPDATES INIT" of a training checkpoint
    python scripts/recipe_info.py squad-windows --data DIR --train-json F [--max-positions 384]
                                                [--doc-stride 128] [--squad-v2]   # its training windows

Each is a function here (the tests call them directly) and a subcommand of the command line
``scripts/recipe_info.py`` (``main``). A recipe asks for all it needs in one run (each run pays
fairseq's import, ~3 s), as bash arrays to ``eval`` (``recipe_facts`` in scripts/lib/common.sh):

    python scripts/recipe_info.py --shell BPE bpe-flags data-bin/sum + PAIRS count-items data-bin/sum/test.source.idx
    BPE=(--bpe sentencepiece --sentencepiece-model /abs/data-bin/sum/spm.model)
    PAIRS=(2000)
"""
import argparse
import json
import logging
import math
import os
import re
import shlex
import sys

import torch

from .data.databin.writer import index_items
from .runtime import disk_full
from .runtime.checkpoint_files import inspect, unreadable
from .symbols import separator_symbol
from .tasks.squad import PMLMSquadConfig, PMLMSquadTask
from .text import tokenizer_files
from .weights.checkpoint import flags_of_checkpoint

GLUE_SHOWN = {"mcc": ["mcc", "accuracy"], "f1": ["f1", "accuracy"], "pearson": ["pearson", "spearman"]}


def schedule(examples, batch, epochs, warmup_ratio, updates=None):
    """(updates, warmup updates) of ``epochs`` epochs of ``examples`` at ``batch`` an update, or of
    ``updates`` updates when given (the warmup keeps its share): the linear schedules of the
    fine-tuning recipes need the total up front."""
    if examples < 1 or batch < 1 or epochs < 1 or not 0 <= warmup_ratio < 1:
        raise ValueError(f"schedule: need examples, batch and epochs >= 1 and a warmup ratio in [0, 1), got "
                         f"{examples}, {batch}, {epochs}, {warmup_ratio}")
    if updates is not None and updates < 1:
        raise ValueError(f"schedule: need updates >= 1, got {updates}")
    updates = math.ceil(examples / batch) * epochs if updates is None else updates
    warmup = max(1, round(warmup_ratio * updates)) if warmup_ratio > 0 else 0
    return updates, warmup


def glue_meta(data):
    """meta.json of a prepare_glue.py output: (task, training examples, metric, classes)."""
    path = os.path.join(data, "meta.json")
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found: binarize with scripts/glue/prepare_glue.py")
    with open(path) as f:
        m = json.load(f)
    return m["task"], m["train_examples"], m["metric"], m["num_classes"]


def glue_report(log, task, metric):
    """The dev results of the epoch with the best value of the task's metric, per dev set, from
    a ``--log-format json`` fairseq-train log; one line each."""
    shown = GLUE_SHOWN.get(metric, [metric])
    best = {}
    with open(log, encoding="utf-8") as f:
        for line in f:
            m = re.search(r"\| (valid\w*) \| (\{.*\})$", line.strip())
            if m:
                subset, rec = m.group(1), json.loads(m.group(2))
                values = {k: float(rec[f"{subset}_{k}"]) for k in shown if f"{subset}_{k}" in rec}
                if metric in values and values[metric] > best.get(subset, {}).get(metric, float("-inf")):
                    best[subset] = dict(values, epoch=int(rec["epoch"]))
    if not best:
        raise ValueError(f"no dev {metric} in {log}")
    return [f"finetune_glue: {task} {subset} (best epoch {v.pop('epoch')}): "
            + ", ".join(f"{k} {x:.2f}" for k, x in v.items()) for subset, v in best.items()]


def gpus():
    return torch.cuda.device_count()


def run_of(checkpoint):
    """(task, updates, absolute --finetune-from-model or "none") of a fairseq-train checkpoint:
    whether a save dir's checkpoint_last.pt is the run a recipe is about to start."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
        cfg, history = state["cfg"], state.get("optimizer_history") or [{}]
        init = cfg["checkpoint"].get("finetune_from_model")
        return cfg["task"]["_name"], history[-1].get("num_updates", 0), os.path.abspath(init) if init else "none"
    except Exception as e:  # unreadable or not a training checkpoint: why, in one line
        # as training says it, with the newest intact checkpoint beside it
        _, reason = inspect(checkpoint)
        if reason is not None:
            raise ValueError(unreadable(checkpoint, reason)) from None
        why = (str(e).splitlines() or [""])[0]
        raise ValueError(f"{checkpoint}: cannot read it ({type(e).__name__}: {why})") from None


def squad_windows(data, train_json, max_positions, doc_stride, v2):
    """The passage windows of a SQuAD training file, as the pmlm_squad task makes them."""
    logging.disable(logging.WARNING)  # the task's per-file notes; the training run prints them
    cfg = PMLMSquadConfig(data=data, squad_v2=v2, max_positions=max_positions, doc_stride=doc_stride)
    return len(PMLMSquadTask.setup_task(cfg).squad_features(train_json, training=True)[2])


def parser():
    p = argparse.ArgumentParser(prog="recipe_info.py", description=__doc__.split("\n")[0],
                                epilog="--shell NAME SUBCOMMAND ARGS [+ NAME SUBCOMMAND ARGS ...]: the answers as bash "
                                       "array assignments, NAME=(LINE ...), from one run")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("bpe-flags").add_argument("dir")
    sub.add_parser("model-flags").add_argument("checkpoint")
    cp = sub.add_parser("copy-tokenizer")
    cp.add_argument("src")
    cp.add_argument("dest")
    s = sub.add_parser("schedule")
    n = s.add_mutually_exclusive_group(required=True)
    n.add_argument("--examples", type=int)
    n.add_argument("--items", metavar="PREFIX.idx", help="the items of a binarized split (count-items) as --examples")
    s.add_argument("--batch", type=int, required=True)
    s.add_argument("--epochs", type=int, required=True)
    s.add_argument("--warmup-ratio", type=float, required=True)
    s.add_argument("--updates", type=int, help="this many updates instead of the epochs'")
    sub.add_parser("glue-meta").add_argument("dir")
    g = sub.add_parser("glue-report")
    for name in ("log", "task", "metric"):
        g.add_argument(name)
    sub.add_parser("gpus")
    sub.add_parser("count-items").add_argument("idx")
    sub.add_parser("separator").add_argument("dir")
    sub.add_parser("run-of").add_argument("checkpoint")
    w = sub.add_parser("squad-windows")
    w.add_argument("--data", required=True)
    w.add_argument("--train-json", required=True)
    w.add_argument("--max-positions", type=int, default=384)
    w.add_argument("--doc-stride", type=int, default=128)
    w.add_argument("--squad-v2", action="store_true")
    return p


def separator_of(directory):
    """The dictionary symbol that carries the sentence separator in a data directory's target
    dictionary (dict.target.txt, else dict.txt), or None: what the model emits between sentences."""
    for name in ("dict.target.txt", "dict.txt"):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return separator_symbol([line.split(" ")[0] for line in f])
    raise ValueError(f"{directory} has no dict.target.txt or dict.txt")


def run(a):
    """The lines to print for the parsed command ``a``."""
    if a.command == "bpe-flags":
        return tokenizer_files.find(a.dir).fairseq_flags()
    if a.command == "copy-tokenizer":
        return [tokenizer_files.copy(a.src, a.dest).kind]
    if a.command == "model-flags":
        if not os.path.isfile(a.checkpoint):
            raise ValueError(f"checkpoint not found: {a.checkpoint}")
        return flags_of_checkpoint(a.checkpoint)
    if a.command == "schedule":
        examples = index_items(a.items) if a.items else a.examples
        return [" ".join(map(str, schedule(examples, a.batch, a.epochs, a.warmup_ratio, a.updates)))]
    if a.command == "glue-meta":
        return [" ".join(map(str, glue_meta(a.dir)))]
    if a.command == "glue-report":
        return glue_report(a.log, a.task, a.metric)
    if a.command == "gpus":
        return [str(gpus())]
    if a.command == "count-items":
        return [str(index_items(a.idx))]
    if a.command == "separator":
        return [separator_of(a.dir) or ""]
    if a.command == "run-of":
        return [" ".join(map(str, run_of(a.checkpoint)))]
    return [str(squad_windows(a.data, a.train_json, a.max_positions, a.doc_stride, a.squad_v2))]


def shell_assignments(argv):
    """``NAME SUBCOMMAND ARGS [+ NAME SUBCOMMAND ARGS ...]`` -> one bash array assignment a query,
    ``NAME=(LINE ...)`` with each printed line one quoted element."""
    queries = [[]]
    for arg in argv:
        if arg == "+":
            queries.append([])
        else:
            queries[-1].append(arg)
    out = []
    for query in queries:
        if len(query) < 2 or not query[0].isidentifier():
            raise ValueError(f"--shell: expected NAME SUBCOMMAND ARGS between +, got {' '.join(query)!r}")
        lines = run(parser().parse_args(query[1:]))
        out.append(f"{query[0]}=({' '.join(shlex.quote(line) for line in lines)})")
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["--shell"]:
            print("\n".join(shell_assignments(argv[1:])))
        else:
            print("\n".join(run(parser().parse_args(argv))))
    except (ValueError, OSError) as e:  # (a full disk: "PATH: cannot write it: ...", as everywhere)
        print(f"recipe_info.py: error: {disk_full.one_line(e, e.__traceback__) or e}", file=sys.stderr)
        return 2
    return 0
