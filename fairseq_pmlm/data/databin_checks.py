"""Checks on data-bins, each error one line naming the file. ``check_shards``: the data
directories ``pseudo_masked_lm`` reads (``DIR0:DIR1:...``, one shard per epoch, round-robin),
checked when training starts rather than when epoch k first reaches shard k: every shard exists
and holds a ``dict.txt`` equal to the first one's (ids binarized with another dictionary would
train silently on the wrong tokens, or fail mid-run on an id past the table) and a non-empty
training split. ``check_files``, before fairseq reads a data-bin: the ``.idx`` as long as its
header's item count needs, and a 0-byte ``.bin`` told apart (cut short, or a split without
lines). ``check_complete``: no ``.bin`` is shorter than its ``.idx`` says (a copy cut short would
otherwise crash mid-epoch, naming no file). Pre-training, fine-tuning and decoding check each
data-bin they load.
"""
import filecmp
import os
import struct

from ..errors import BadInput, InputNotFound
from .databin.writer import INDEX_HEADER, index_header

AGAIN = "(an interrupted copy? prepare or copy it again)"


def check_shards(paths, split="train"):
    """``paths``: the data directories in order. Raises InputNotFound / BadInput (one line)."""
    first_dict = os.path.join(paths[0], "dict.txt")
    for k, path in enumerate(paths):
        if not path:
            raise InputNotFound(f"shard {k} of {len(paths)} is an empty path: a ':' too many in --data "
                                f"{':'.join(paths)}")
        if not os.path.isdir(path):
            raise InputNotFound(f"shard {k} of {len(paths)} not found: {path}")
        dict_path = os.path.join(path, "dict.txt")
        if k and not os.path.isfile(dict_path):
            raise InputNotFound(f"shard {k} has no dict.txt: {dict_path} missing (every shard must be binarized "
                                f"with one dictionary; if this one was made with {first_dict}, copy it there)")
        if k and not filecmp.cmp(first_dict, dict_path, shallow=False):
            raise BadInput(f"{dict_path} differs from {first_dict}: every shard must be binarized with one "
                           "dictionary (scripts/prepare_data.sh --shards K does that)")
        for ext in ("idx", "bin"):
            if not os.path.isfile(os.path.join(path, f"{split}.{ext}")):
                raise InputNotFound(f"shard {k} has no {split} split: {os.path.join(path, split)}.{ext} missing")
        check_files(os.path.join(path, split))


def check_files(prefix):
    """PREFIX.idx and PREFIX.bin, before fairseq maps them (a truncated index was a chained
    traceback, "buffer is smaller than requested size"; a 0-byte .bin "cannot mmap an empty file").
    Raises BadInput (one line); an index that is not fairseq's mmap one is left to fairseq."""
    idx, bin_ = prefix + ".idx", prefix + ".bin"
    if not (os.path.isfile(idx) and os.path.isfile(bin_)):
        return
    try:
        items, itemsize = index_header(idx)
    except ValueError:
        if os.path.getsize(idx) < INDEX_HEADER:
            raise BadInput(f"{idx} is cut short: {os.path.getsize(idx):,} bytes, not even its header {AGAIN}") from None
        return
    need, have = INDEX_HEADER + items * (4 + 8), os.path.getsize(idx)  # an int32 size, an int64 offset each
    if have < need:
        raise BadInput(f"{idx} is cut short: {have:,} bytes where its header's {items:,} items need {need:,} {AGAIN}")
    if os.path.getsize(bin_) == 0:
        if items == 0:
            raise BadInput(f"dataset is empty: {bin_} ({idx} lists no lines: the split's text had none)")
        with open(idx, "rb") as f:  # the last item's size and offset: where the .bin must reach
            f.seek(INDEX_HEADER + (items - 1) * 4)
            size = struct.unpack("<i", f.read(4))[0]
            f.seek(INDEX_HEADER + items * 4 + (items - 1) * 8)
            end = struct.unpack("<q", f.read(8))[0] + size * itemsize
        if end > 0:
            raise BadInput(f"{bin_} is cut short: 0 bytes where {idx} needs {end:,} {AGAIN}")
        raise BadInput(f"dataset is empty: {bin_} (its {items:,} lines hold no tokens)")


def check_complete(prefix, dataset):
    """The ``.bin`` of an mmap data-bin holds every token its ``.idx`` points to."""
    index = getattr(dataset, "_index", None)
    if index is None or len(dataset) == 0:
        return
    need = int(index._pointers[-1]) + int(index._sizes[-1]) * index.dtype().itemsize
    have = os.path.getsize(prefix + ".bin")
    if have < need:
        raise BadInput(f"{prefix}.bin is cut short: {have:,} bytes where {prefix}.idx needs {need:,} {AGAIN}")
