"""fairseq checkpoint files for imported weights, and atomic output directories.

A converted checkpoint looks like one ``fairseq-train`` saved before its first update:
the full ``cfg`` (made by fairseq's own training parser, so every group the hub
interface and ``load_model_ensemble_and_task`` read is there), the model state, one
optimizer-history entry at update 0, no optimizer state and a fresh train iterator. So
``--finetune-from-model`` and ``--restore-file`` both accept it, and it loads under
torch's ``weights_only=True``: it holds only tensors and plain containers.
"""
import os
from dataclasses import fields

import torch

from ..arch import ARCH_SIZES, SIZE_FIELDS, TransformerShape
from ..runtime import output_dir
from .layouts import SEQ2SEQ_FIELDS, ConversionError

USER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pick_arch(shape, requested=None):
    """The registered arch whose sizes match (``unilmv2`` with explicit sizes if none
    does). ``requested``: the user's ``--arch``, which must match the config."""
    sizes = tuple(getattr(shape, f) for f in SIZE_FIELDS)
    if requested is not None:
        if requested in ARCH_SIZES and ARCH_SIZES[requested] != sizes:
            raise ConversionError(
                f"--arch {requested} is (layers, hidden, ffn, heads) = {ARCH_SIZES[requested]} but "
                f"config.json says {sizes}"
            )
        if requested not in ARCH_SIZES and requested != "unilmv2":
            raise ConversionError(f"--arch {requested!r} is not one of unilmv2, {', '.join(ARCH_SIZES)}")
        return requested
    return next((a for a, s in ARCH_SIZES.items() if s == sizes), "unilmv2")


def model_flags(shape: TransformerShape, arch):
    """The fairseq-train model flags that rebuild exactly this model (besides ``--arch``): the sizes
    where no arch names them, and every other field that differs from its default."""
    flags = []
    if arch == "unilmv2":
        flags += [f"--{f.replace('_', '-')}={getattr(shape, f)}" for f in SIZE_FIELDS]
    unused = ("rel_pos_buckets", "max_rel_distance") if shape.no_rel_pos else ()
    for f in fields(TransformerShape):
        v = getattr(shape, f.name)
        if f.name in SIZE_FIELDS or f.name in unused or v == f.default:
            continue
        flags.append(f"--{f.name.replace('_', '-')}" + ("" if isinstance(v, bool) else f"={v}"))
    return flags


def flags_of_checkpoint(path):
    """``--arch A [flags]`` that rebuild the model of a checkpoint saved by fairseq-train or
    the converter, for ``--finetune-from-model`` (which takes the weights, not the arch).
    Reads the cfg only (torch's memory-mapped load: no fairseq import, no tensor copies)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001  (any unreadable file: one line naming it)
        raise ConversionError(f"cannot read checkpoint {path}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    model = ((state.get("cfg") or {}).get("model") or {}) if isinstance(state, dict) else {}
    if not str(model.get("_name", "")).startswith("unilmv2"):
        raise ConversionError(f"{path} is not a unilmv2 checkpoint (its model is {model.get('_name')!r})")
    shape = TransformerShape.of(model)
    arch = pick_arch(shape)
    return ["--arch", arch, *model_flags(shape, arch)]


def training_cfg(data_dir, shape, arch, bpe_vocab=None, cased=False, seq2seq=None):
    """The cfg ``fairseq-train DATA --task pseudo_masked_lm --arch ARCH ...`` would save; with
    ``seq2seq`` (a dict of some of layouts.SEQ2SEQ_FIELDS), that of ``--task pmlm_seq2seq`` with them
    (a sequence-to-sequence model: the hub's ``generate`` and fill-mask go by the task)."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    if seq2seq is None:
        task = ["--task", "pseudo_masked_lm", "--criterion", "pmlm", "--tokens-per-sample",
                str(min(512, shape.max_positions))]
    else:
        task = ["--task", "pmlm_seq2seq", "--criterion", "pmlm_seq2seq",
                *[a for k in SEQ2SEQ_FIELDS if k in seq2seq for a in ("--" + k.replace("_", "-"), str(seq2seq[k]))]]
    argv = [data_dir, "--user-dir", USER_DIR, *task, "--arch", arch, "--optimizer", "adam", *model_flags(shape, arch)]
    if bpe_vocab:
        argv += ["--bpe", "bert", "--bpe-vocab-file", bpe_vocab] + (["--bpe-cased"] if cased else [])
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    return OmegaConf.to_container(convert_namespace_to_omegaconf(args), resolve=True, enum_to_str=True)


def checkpoint_state(cfg, model_state):
    copies = {}  # tied weights (the LM head's and the embedding's) stay one tensor: saved once

    def copy(v):
        return copies.setdefault((v.data_ptr(), v.dtype, v.shape, v.stride()), v.detach().clone())

    return {
        "args": None,
        "cfg": cfg,
        "model": {k: copy(v) for k, v in model_state.items()},
        "criterion": None,
        "optimizer_history": [{"criterion_name": "PMLMCriterion", "optimizer_name": "FairseqAdam",
                               "lr_scheduler_state": {"best": None}, "num_updates": 0}],
        "task_state": {},
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "shuffle": True, "version": 2}},
        "last_optimizer_state": None,
    }


def refuse_replacing_inputs(out_dir, inputs):
    """Never replace a directory that holds one of ``inputs``, with or without --force."""
    output_dir.check_inputs(out_dir, inputs, ConversionError)


def output_directory(out_dir, force=False):
    """``with output_directory(OUT, force) as output:`` fill ``output.path``; it becomes OUT only if
    the block finishes (``runtime/output_dir.py``: a failure or an interrupt leaves no partial output)."""
    return output_dir.building(out_dir, force, error=ConversionError)


def load(path):
    """A fairseq checkpoint, read as fairseq reads it (``weights_only=True`` by default)."""
    from fairseq import checkpoint_utils

    return checkpoint_utils.load_checkpoint_to_cpu(path)


def save(state, path):
    """``torch.save`` through a file object: to a path, torch reports a full disk as "unexpected pos"."""
    with open(path, "wb") as f:
        torch.save(state, f)
