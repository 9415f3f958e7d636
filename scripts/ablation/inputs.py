"""What an objective ablation is given (scripts/ablate_objectives.py): the objectives, seeds and
inputs checked before the first run starts, each problem one line (``Failure``), and OUT's
settings.json, which makes a re-run with other settings a refusal."""
import json
import logging
import os
import shlex

import torch

from fairseq_pmlm.data.databin.writer import index_items
from fairseq_pmlm.data.pmlm_dictionary import load_pmlm_dictionary
from fairseq_pmlm.errors import OneLineError
from fairseq_pmlm.models.unilmv2 import dictionary_digest, dictionary_misfit
from fairseq_pmlm.objectives import NAMES
from fairseq_pmlm.text.lines import count_lines

OBJECTIVES = ("none", *NAMES)  # the paper's Table 6 rows, plus no pre-training


class Failure(OneLineError):
    """A one-line error: printed as ``ablate_objectives.sh: error: ...``, exit status 2."""


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


def write_json(path, obj):
    """Written whole or not at all: a kill never leaves half a marker behind."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def read_json(path):
    with open(path) as f:
        return json.load(f)
