"""The data-bin engine's last stage: the workers' part files, in order, -> fairseq's mmap data-bin
(``PREFIX.bin`` through the id -> dictionary-row table, ``PREFIX.idx`` written with numpy), and
the tokenizer files a data directory holds beside its dictionary (``text/tokenizer_files.py``)."""
import os
import shutil
import struct

import numpy as np

from ...text import tokenizer_files
from .workers import part_dtype

_IDX_MAGIC = b"MMIDIDX\x00\x00"
_DTYPE_CODE = {np.dtype(np.uint16): 8, np.dtype(np.uint32): 9, np.dtype(np.int64): 5}  # fairseq's codes


def write_databin(parts, table, prefix, n_symbols):
    """Concatenate the parts (in order) into ``prefix``.bin/.idx, ids mapped through ``table``,
    deleting each part once copied (the disk holds the data-bin plus one part, not two copies).
    Returns (lines, tokens, unk count)."""
    dtype = np.dtype(np.uint16 if n_symbols < 65500 else np.uint32)
    unk = 3  # fairseq's Dictionary: <s> <pad> </s> <unk>
    tokens = unks = lines = 0
    with open(prefix + ".bin", "wb") as out:
        for part in parts:
            dtype_in = part_dtype(len(table) - 1)
            ids = np.memmap(part + ".ids", dtype=dtype_in, mode="r") if os.path.getsize(part + ".ids") else []
            for s in range(0, len(ids), 1 << 24):
                rows = table[ids[s:s + (1 << 24)]]
                unks += int(np.count_nonzero(rows == unk))
                out.write(rows.astype(dtype).tobytes())
            tokens += len(ids)
            del ids
            os.remove(part + ".ids")
    lines = write_index(prefix + ".idx", [p + ".sizes" for p in parts], dtype)
    for part in parts:
        os.remove(part + ".sizes")
    return lines, tokens, unks


def write_index(path, sizes_files, dtype):
    """fairseq's mmap ``.idx`` for items whose int32 sizes are in ``sizes_files`` (in order):
    header, sizes, byte pointers; streamed file by file. Returns the number of items."""
    lines = sum(os.path.getsize(f) // 4 for f in sizes_files)
    with open(path, "wb") as idx:
        idx.write(_IDX_MAGIC + struct.pack("<Q", 1) + struct.pack("<B", _DTYPE_CODE[np.dtype(dtype)]))
        idx.write(struct.pack("<Q", lines))
        for f in sizes_files:
            idx.write(np.fromfile(f, dtype=np.int32).tobytes())
        address = 0
        for f in sizes_files:  # pointers: a running sum of the sizes in bytes
            sizes = np.fromfile(f, dtype=np.int32).astype(np.int64) * np.dtype(dtype).itemsize
            pointers = np.cumsum(sizes) - sizes + address
            address += int(sizes.sum())
            idx.write(pointers.tobytes())
    return lines


INDEX_HEADER = 26  # bytes: magic (9), version (8), dtype code (1), item count (8)
_ITEMSIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 8, 8: 2, 9: 4, 10: 8}  # fairseq's dtype codes -> bytes


def index_header(path):
    """(items, bytes a token) of a fairseq mmap ``.idx``, read off its header (the one ``write_index``
    writes: magic, version, dtype code, then the count as 8 bytes little-endian); after it come
    the items' sizes (int32 each) and their byte offsets in the ``.bin`` (int64 each)."""
    try:
        with open(path, "rb") as f:
            head = f.read(INDEX_HEADER)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    if head[:9] != _IDX_MAGIC or len(head) < INDEX_HEADER or head[17] not in _ITEMSIZE:
        raise ValueError(f"{path} is not a fairseq mmap index (fairseq-preprocess --dataset-impl mmap)")
    return struct.unpack("<Q", head[18:26])[0], _ITEMSIZE[head[17]]


def index_items(path):
    """The number of items of a fairseq mmap ``.idx`` (``index_header``)."""
    return index_header(path)[0]


def write_tokenizer_files(spec, directory):
    kind, path, cased = spec
    if kind == "spm":
        shutil.copy(path, os.path.join(directory, tokenizer_files.SENTENCEPIECE))
    else:
        shutil.copy(path, os.path.join(directory, tokenizer_files.WORDPIECE))
        if cased is not None:
            tokenizer_files.write_casing(directory, cased)
