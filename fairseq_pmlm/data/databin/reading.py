"""The data-bin engine's first stage: lines of a byte range of a file, and where to cut inputs.

A line ends at ``\\n`` only, as ``wc -l`` counts them: a ``\\r`` before it is dropped and any other
``\\r`` is a space (Python's universal newlines would split a line there and shift every later
pair). Text must be UTF-8: a bad byte stops with ``FILE:LINE: ...`` (``line_number``, computed
only then). Inputs are cut into parts at line starts (``part_offsets``) and into shards at
document starts (``shard_plan``), so that workers and shards can read their pieces alone.
"""
import os

import numpy as np

from ...text.lines import count_lines  # noqa: F401  (the one line-counting rule; re-exported)
from . import PrepareError

PART_BYTES = 32 << 20  # a worker's unit of work; small enough to balance 2..64 workers
MIN_PART_BYTES = 1 << 20
BATCH_LINES = 2000  # lines per tokeniser call: memory ~ a few MB per worker


def line_number(path, offset, index_in_part):
    """1-based line number of the ``index_in_part``-th line of the part starting at ``offset``
    (only computed for error messages)."""
    newlines = 0
    with open(path, "rb") as f:
        remaining = offset
        while remaining > 0:
            block = f.read(min(remaining, 1 << 24))
            if not block:
                break
            newlines += block.count(b"\n")
            remaining -= len(block)
    return newlines + index_in_part + 1


def read_lines(path, start, end):
    """Decoded lines of ``path`` whose first byte lies in [start, end), in batches. A trailing
    ``\\r`` is dropped, any other ``\\r`` becomes a space; invalid UTF-8 -> PrepareError."""
    batch, n_done = [], 0
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        while pos < end:
            raw = f.readline()
            if not raw:
                break
            pos += len(raw)
            raw = raw.rstrip(b"\n")
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                line = line_number(path, start, n_done + len(batch))
                raise PrepareError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
                                   f"{e.start + 1}); convert it, e.g. iconv -f latin1 -t utf-8") from None
            batch.append(text.replace("\r", " ") if "\r" in text else text)
            if len(batch) == BATCH_LINES:
                yield batch
                n_done += len(batch)
                batch = []
    if batch:
        yield batch


def part_offsets(path, start, end, part_bytes=PART_BYTES):
    """Cut [start, end) of ``path`` at line starts into parts of about ``part_bytes``."""
    cuts = [start]
    with open(path, "rb") as f:
        target = start + part_bytes
        while target < end:
            f.seek(target)
            f.readline()  # to the next line start
            cut = f.tell()
            if cut >= end:
                break
            cuts.append(cut)
            target = cut + part_bytes
    return list(zip(cuts, cuts[1:] + [end]))


def next_document_start(path, offset, scan_limit=64 << 20):
    """The first byte after ``offset`` where a document starts (the line after a blank line),
    or the file's end; where no blank line comes within ``scan_limit`` bytes, the next line start."""
    with open(path, "rb") as f:
        f.seek(offset)
        f.readline()  # to a line start
        scanned = 0
        while True:
            pos = f.tell()
            line = f.readline()
            if not line:
                return pos
            if not line.strip(b"\r\n"):  # a blank line: the next line starts a document
                return f.tell()
            scanned += len(line)
            if scanned > scan_limit:
                return pos


def shard_plan(files, k):
    """[[(path, start, end), ...] per shard]: the files' bytes in order, as one stream, cut into
    k shards of about equal size at document boundaries (the end of a file is one)."""
    sizes = [os.path.getsize(f) for f in files]
    starts = np.cumsum([0] + sizes)
    cuts = [(0, 0)]  # (file, offset)
    for i in range(1, k):
        target = int(starts[-1]) * i // k
        j = int(np.searchsorted(starts, target, side="right")) - 1
        j = min(j, len(files) - 1)
        cuts.append(max(cuts[-1], (j, next_document_start(files[j], target - int(starts[j])))))
    cuts.append((len(files) - 1, sizes[-1]))
    shards = []
    for (fa, oa), (fb, ob) in zip(cuts, cuts[1:]):
        ranges = [(files[j], oa if j == fa else 0, ob if j == fb else sizes[j]) for j in range(fa, fb + 1)]
        shards.append([r for r in ranges if r[2] > r[1]])
    return shards


def has_text(path):
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            if block.strip():
                return True
    return False
