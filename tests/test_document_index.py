"""The vectorised example index of pseudo_masked_lm equals the reference Python packing
(tests/pack_reference.py) chunk for chunk, and stays small per line."""
import tracemalloc

import numpy as np
import pytest

from fairseq_pmlm.data.document_index import build_document_index

from pack_reference import pack_documents


def chunks_of(index, sizes, max_tokens):
    return [index.pieces(i, lambda line: int(sizes[line]) - 1, max_tokens) for i in range(len(index))]


def reference_chunks(sizes, max_tokens):
    pieces, offsets, stats = pack_documents(sizes, max_tokens)
    chunks = [[tuple(r) for r in pieces[offsets[i]:offsets[i + 1]].tolist()] for i in range(len(offsets) - 1)]
    return chunks, stats


def test_the_docstring_worked_example():
    # tokens without EOS per line (0 = blank line), max_tokens 8
    n = [3, 0, 1, 2, 5, 0, 1, 0, 4, 4, 4, 0, 19]
    sizes = np.array(n) + 1
    index = build_document_index(sizes, 8)
    assert [int(x) for x in index.lengths] == [3, 8, 8, 4, 8, 8, 3]
    assert chunks_of(index, sizes, 8)[-3:] == [[(12, 0, 8)], [(12, 8, 16)], [(12, 16, 19)]]
    assert (index.documents, index.short_documents, index.long_sentences) == (5, 1, 1)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_tokens", [1, 2, 5, 61, 509])
@pytest.mark.parametrize("block_lines", [7, 1000, 1 << 22])  # blocks cut after blank lines change nothing
def test_same_chunks_and_counts_as_the_reference_packing_on_random_corpora(seed, max_tokens, block_lines):
    rng = np.random.default_rng(seed)
    # blank lines (runs of them too), 1-token lines, long lines, a corpus that starts/ends either way
    n = rng.choice([0, 0, 1, 2, 3, 7, 20, 60, 200, 1200], size=3000, p=[.15, .05, .1, .1, .15, .15, .15, .1, .04, .01])
    sizes = n + 1
    chunks, stats = reference_chunks(sizes, max_tokens)
    index = build_document_index(sizes, max_tokens, block_lines)
    assert chunks_of(index, sizes, max_tokens) == chunks
    assert (index.documents, index.short_documents, index.long_sentences) == (
        stats["documents"], stats["short_documents"], stats["long_sentences"])
    assert [int(x) for x in index.lengths] == [sum(e - s for _, s, e in c) for c in chunks]


def test_same_chunks_as_the_reference_on_a_real_data_bin(real_sizes):
    for max_tokens in (61, 125, 509):
        chunks, _ = reference_chunks(real_sizes, max_tokens)
        assert chunks_of(build_document_index(real_sizes, max_tokens), real_sizes, max_tokens) == chunks


@pytest.fixture(scope="module")
def real_sizes(tmp_path_factory):
    """Line sizes of real text (stdlib docstrings, one sentence a line) binarized by the recipe's engine."""
    from fairseq_pmlm.data.databin.cli import main as text_to_databin

    from helpers import stdlib_docstrings

    tmp = tmp_path_factory.mktemp("real")
    _, sentences = stdlib_docstrings(["json/__init__", "argparse", "collections/__init__", "textwrap", "csv"])
    (tmp / "train.txt").write_text("\n".join(sentences) + "\n")
    rc = text_to_databin(["--out", str(tmp / "bin"), "corpus", "--train", str(tmp / "train.txt"),
                               "--valid", str(tmp / "train.txt"), "--vocab-size", "500"])
    assert rc == 0
    from fairseq.data import data_utils

    lines = data_utils.load_indexed_dataset(str(tmp / "bin" / "train"), None)
    sizes = np.array(lines.sizes)  # a copy: the mmap closes with its dataset
    del lines
    return sizes


ARRAYS = ("first_line", "first_offset", "last_line", "end_offset", "lengths")


def test_the_index_holds_no_per_line_array():
    sizes = np.full(200_000, 21)
    sizes[::20] = 1  # documents of 19 sentences
    index = build_document_index(sizes, 509)
    per_line = sum(getattr(index, f).nbytes for f in ARRAYS) / len(sizes)
    assert per_line < 2, per_line  # 20 bytes a chunk, ~20 lines a chunk


def test_the_index_holds_20_bytes_a_chunk():
    index = build_document_index(np.array([5, 1, 30, 40, 1, 3]), 8)
    assert sum(getattr(index, f).itemsize for f in ARRAYS) == 20


def test_building_peaks_at_twice_the_index_plus_one_block_of_temporaries():
    """Peak memory while building is bounded per line: the blocks' results and their join (twice
    the index) plus one block's temporaries, whatever the corpus size."""
    rng = np.random.default_rng(0)
    lines, block_lines = 1_000_000, 200_000
    sizes = rng.integers(3, 47, size=lines).astype(np.int32)  # ~22 tokens a line, a blank line in ~10
    sizes[rng.random(lines) < 0.1] = 1
    tracemalloc.start()
    try:
        index = build_document_index(sizes, 125, block_lines)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held <= 21 * len(index) + 10_000, held / len(index)
    assert peak <= 2 * held + 45 * block_lines, (peak - 2 * held) / block_lines
