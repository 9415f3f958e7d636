"""Checks on data-bins, each error one line naming the file. ``check_shards``: the data
directories ``pseudo_masked_lm`` reads (``DIR0:DIR1:...``, one shard per epoch, round-robin),
checked when training starts rather than when epoch k first reaches shard k: every shard exists
and holds the first one's ``dict.txt`` and a non-empty training split. ``check_complete``: no
``.bin`` is shorter than its ``.idx`` says (a copy cut short would otherwise crash mid-epoch,
naming no file); both pre-training and sequence-to-sequence datasets are checked as loaded.
"""
import filecmp
import os


def check_shards(paths, split="train"):
    """``paths``: the data directories in order. Raises FileNotFoundError / ValueError."""
    first_dict = os.path.join(paths[0], "dict.txt")
    for k, path in enumerate(paths):
        if not os.path.isdir(path):
            raise FileNotFoundError(f"shard {k} of {len(paths)} not found: {path}")
        dict_path = os.path.join(path, "dict.txt")
        if k and os.path.isfile(dict_path) and not filecmp.cmp(first_dict, dict_path, shallow=False):
            raise ValueError(f"{dict_path} differs from {first_dict}: every shard must be binarized with one "
                             "dictionary (scripts/prepare_data.sh --shards K does that)")
        for ext in ("idx", "bin"):
            if not os.path.isfile(os.path.join(path, f"{split}.{ext}")):
                raise FileNotFoundError(f"shard {k} has no {split} split: {os.path.join(path, split)}.{ext} missing")
        if os.path.getsize(os.path.join(path, f"{split}.bin")) == 0:
            raise ValueError(f"dataset is empty: {os.path.join(path, split)}.bin (the text had no tokens)")


def check_complete(prefix, dataset):
    """The ``.bin`` of an mmap data-bin holds every token its ``.idx`` points to."""
    index = getattr(dataset, "_index", None)
    if index is None or len(dataset) == 0:
        return
    need = int(index._pointers[-1]) + int(index._sizes[-1]) * index.dtype().itemsize
    have = os.path.getsize(prefix + ".bin")
    if have < need:
        raise ValueError(f"{prefix}.bin is cut short: {have:,} bytes where {prefix}.idx needs {need:,} "
                         "(an interrupted copy? prepare or copy it again)")
