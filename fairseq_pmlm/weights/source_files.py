"""The files of a source to import: found in its directory (or beside a released weights file),
and its weights read into one state dict, each problem said in one line naming the file.

A Hugging Face directory holds ``model.safetensors`` or ``pytorch_model.bin``, or, saved in
shards (``save_pretrained(..., max_shard_size=...)``, the Hub's larger models), an index
``model.safetensors.index.json`` / ``pytorch_model.bin.index.json`` whose ``weight_map`` names the
shard of each tensor: read here as one state dict.
"""
import glob
import json
import os
import struct

import torch

from ..runtime.checkpoint_files import torch_file_problem
from .layouts import ConversionError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
INDEX_FILES = tuple(f"{name}.index.json" for name in WEIGHT_FILES)


def _one(pattern, what, where):
    hits = sorted(glob.glob(pattern))
    if len(hits) > 1:
        raise ConversionError(f"several {what} files in {where}: {', '.join(map(os.path.basename, hits))}")
    return hits[0] if hits else None


def _first_file(directory, names):
    return next((os.path.join(directory, n) for n in names if os.path.isfile(os.path.join(directory, n))), None)


def locate(src, weights=None, config=None, vocab_file=None):
    """(weights or their shards' index, config.json, vocab.txt) of a BERT directory or a released
    UniLMv2 file."""
    if os.path.isdir(src):
        d = src
        weights = weights or _first_file(d, WEIGHT_FILES + INDEX_FILES) or _one(
            os.path.join(d, "*.bin"), "weights", d)
        config = config or (os.path.join(d, "config.json") if os.path.isfile(os.path.join(d, "config.json"))
                            else _one(os.path.join(d, "*-config.json"), "config", d))
        vocab_file = vocab_file or _first_file(d, ("vocab.txt", "tokenizer.json")) or _one(
            os.path.join(d, "*-vocab.txt"), "vocab", d)
    elif os.path.isfile(src):
        d, stem = os.path.dirname(os.path.abspath(src)), os.path.splitext(os.path.basename(src))[0]
        weights = weights or src
        config = config or _first_file(d, (f"{stem}-config.json", "config.json"))
        vocab_file = vocab_file or _first_file(d, (f"{stem}-vocab.txt", "vocab.txt"))
    else:
        raise ConversionError(f"not found: {src}")
    for what, path, flag in (("weights", weights, "--weights"), ("config.json", config, "--config"),
                             ("vocab.txt or tokenizer.json", vocab_file, "--vocab")):
        if not path or not os.path.isfile(path):
            raise ConversionError(f"no {what} found for {src}" + (f" ({path} missing)" if path else f": pass {flag}"))
    return weights, config, vocab_file


def read_weights(path):
    """The state dict of a weights file, or of all the shards an index file names."""
    state = _read_shards(path) if path.endswith(".index.json") else _read_one(path)
    if not isinstance(state, dict):
        raise ConversionError(f"{path} holds a {type(state).__name__}, not a state dict")
    return state


def _read_shards(index):
    try:
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConversionError(f"{index} is no index of weight shards (JSON with a weight_map: tensor -> file): "
                              f"{type(e).__name__}: {e}") from None
    state = {}
    for shard in shards:
        path = os.path.join(os.path.dirname(index), shard)
        if not os.path.isfile(path):
            raise ConversionError(f"{path} missing: {os.path.basename(index)} names it as a shard of the weights")
        part = _read_one(path)
        missing = sorted(k for k, v in weight_map.items() if v == shard and k not in part)
        if missing:
            raise ConversionError(f"{path} lacks {missing[0]}, which {os.path.basename(index)} puts there"
                                  + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
        state.update(part)
    return state


def _read_one(path):
    try:
        if path.endswith(".safetensors"):
            from safetensors.torch import load_file

            return load_file(path)
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001  (any unreadable file: one line naming it)
        reason = _safetensors_problem(path) if path.endswith(".safetensors") else torch_file_problem(path)[1]
        reason = reason or f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
        raise ConversionError(f"cannot read weights from {path}: {reason}") from None


def _safetensors_problem(path):
    """A safetensors file shorter than its header says (a download cut short), else None."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    need = 8 + n + end
    return f"truncated: {size:,} bytes of the {need:,} its header describes" if size < need else None
