"""Checks on data-bins, each error one line naming the file. ``check_shards``: the data
directories ``pseudo_masked_lm`` reads (``DIR0:DIR1:...``, one shard per epoch, round-robin),
checked when training starts rather than when epoch k first reaches shard k: every shard exists
and holds a ``dict.txt`` equal to the first one's (ids binarized with another dictionary would
train silently on the wrong tokens, or fail mid-run on an id past the table) and a non-empty
training split. ``check_complete``: no ``.bin`` is shorter than its ``.idx`` says (a copy cut
short would otherwise crash mid-epoch, naming no file); both pre-training and
sequence-to-sequence datasets are checked as loaded.
"""
import filecmp
import os

from ..errors import BadInput, InputNotFound


def check_shards(paths, split="train"):
    """``paths``: the data directories in order. Raises InputNotFound / BadInput (one line)."""
    first_dict = os.path.join(paths[0], "dict.txt")
    for k, path in enumerate(paths):
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
        if os.path.getsize(os.path.join(path, f"{split}.bin")) == 0:
            raise BadInput(f"dataset is empty: {os.path.join(path, split)}.bin (the text had no tokens)")


def check_complete(prefix, dataset):
    """The ``.bin`` of an mmap data-bin holds every token its ``.idx`` points to."""
    index = getattr(dataset, "_index", None)
    if index is None or len(dataset) == 0:
        return
    need = int(index._pointers[-1]) + int(index._sizes[-1]) * index.dtype().itemsize
    have = os.path.getsize(prefix + ".bin")
    if have < need:
        raise BadInput(f"{prefix}.bin is cut short: {have:,} bytes where {prefix}.idx needs {need:,} "
                         "(an interrupted copy? prepare or copy it again)")
