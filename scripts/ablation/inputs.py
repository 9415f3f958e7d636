"""What an objective ablation is given (scripts/ablate_objectives.py): the objectives, seeds and
inputs checked before the first run starts, each problem one line (``Failure``), and OUT's
settings.json, which makes a re-run with other settings a refusal."""
import contextlib
import glob
import io
import json
import logging
import os
import shlex
import subprocess

import torch

from fairseq_pmlm.data.databin.writer import index_items
from fairseq_pmlm.data.pmlm_dictionary import load_pmlm_dictionary
from fairseq_pmlm.errors import OneLineError
from fairseq_pmlm.models.unilmv2 import dictionary_digest, dictionary_misfit
from fairseq_pmlm.objectives import NAMES
from fairseq_pmlm.text.lines import count_lines
from fairseq_pmlm.weights.checkpoint import flags_of_checkpoint

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


def check_settings(a, objectives, root):
    """The preset and the fairseq-train flags of every stage, by their own parsers, before --out is
    claimed: a typo is one line now, not a failed first run that --out then remembers."""
    presets = os.path.join(root, "scripts", "s2s", "presets.sh")
    proc = subprocess.run(["bash", "-c", 'die() { echo "$*" >&2; exit 2; }; source "$0"; preset "$1"', presets,
                           a.preset], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Failure(proc.stderr.strip())
    model = ["--arch", a.arch] if a.init == "random" else flags_of_checkpoint(a.init)
    stages = [("--ft-flags", a.ft_flags, [a.pairs, "--task", "pmlm_seq2seq", "--criterion", "pmlm_seq2seq"])]
    if any(o != "none" for o in objectives):
        stages.append(("the flags after --", shlex.join(a.extra),
                       [a.pretrain_data, "--task", "pseudo_masked_lm", "--criterion", "pmlm"]))
    for what, flags, argv in stages:
        refusal = fairseq_train_refusal([*argv, "--user-dir", os.path.join(root, "fairseq_pmlm"), *model,
                                         *shlex.split(a.device_flags), *shlex.split(flags)])
        if refusal:
            raise Failure(f"{what} {flags!r}: fairseq-train refuses them: {refusal}")


def fairseq_train_refusal(argv):
    """fairseq-train's parser's complaint about ``argv`` (nothing is run), or None."""
    from fairseq import options

    err = io.StringIO()
    logging.disable(logging.INFO)  # "--user-dir ... has already been imported"
    try:
        with contextlib.redirect_stderr(err):
            _, rest = options.parse_args_and_arch(options.get_training_parser(), argv, parse_known=True)
    except SystemExit:
        return (err.getvalue().strip().splitlines() or ["?"])[-1].split(" error: ", 1)[-1]
    finally:
        logging.disable(logging.NOTSET)
    return f"unrecognized arguments: {' '.join(rest)}" if rest else None


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
        finished = glob.glob(os.path.join(glob.escape(a.out), "runs", "*", "*", "done.json"))
        if changed and finished:
            raise Failure(f"--out {a.out} holds runs made with other settings ({', '.join(changed)}): pass the "
                          f"settings of {path} to resume them, or pick another --out")
        if changed:
            print(f"ablate_objectives.sh: no stage under {a.out} had finished: its settings are replaced "
                  f"({', '.join(changed)})")
            write_json(path, settings)
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
