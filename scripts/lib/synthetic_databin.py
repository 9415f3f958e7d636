"""Synthetic data-bins for the benchmarks, written straight in fairseq's mmap format (no text, no
tokenising): sentence-per-line item sizes (EOS included) uniform in [low, high), a blank line
(size 1: a document end) with probability ``blank_prob``."""
import os

import numpy as np

from fairseq_pmlm.data.databin.writer import write_index

CHUNK_LINES = 1 << 20  # lines generated at a time: memory stays small whatever the corpus
EOS = 2  # fairseq's Dictionary: <s> <pad> </s> <unk>, then the symbols


def write_synthetic_databin(prefix, lines, low, high, blank_prob, n_symbols=None, seed=0):
    """``prefix``.bin/.idx of ``lines`` items. ``n_symbols``: random ids of that many dictionary
    symbols, each line ending in EOS; None: a sparse .bin of the right length (for code that reads
    the sizes only). Returns the number of tokens."""
    rng = np.random.default_rng(seed)
    total = 0
    with open(prefix + ".sizes", "wb") as sizes_file, open(prefix + ".bin", "wb") as bin_file:
        for start in range(0, lines, CHUNK_LINES):
            n = min(CHUNK_LINES, lines - start)
            sizes = rng.integers(low, high, size=n).astype(np.int32)
            sizes[rng.random(n) < blank_prob] = 1
            sizes_file.write(sizes.tobytes())
            count = int(sizes.sum())
            total += count
            if n_symbols is not None:
                ids = rng.integers(4, 4 + n_symbols, size=count, dtype=np.uint16)
                ids[np.cumsum(sizes) - 1] = EOS
                bin_file.write(ids.tobytes())
        bin_file.truncate(total * 2)
    write_index(prefix + ".idx", [prefix + ".sizes"], np.uint16)
    os.remove(prefix + ".sizes")
    return total


def write_dictionary(path, n_symbols):
    """A fairseq ``dict.txt`` of ``n_symbols`` made-up symbols."""
    with open(path, "w") as f:
        f.writelines(f"w{i} {n_symbols - i}\n" for i in range(n_symbols))
