"""The example index of ``pseudo_masked_lm``: which tokens of the data-bin each example holds.

Each document's sentences (data-bin lines; a blank line ends a document) are packed greedily
into chunks of at most ``max_tokens`` tokens (EOS not counted); a sentence longer than that is
first cut into pieces of ``max_tokens``; chunks of fewer than 2 tokens (S1 and S2 need one
each) are dropped. Worked example, ``max_tokens`` 8, line sizes without EOS (0 = blank line):

    lines   3 | 0 | 1 2 5 | 0 | 1 | 0 | 4 4 4 | 0 | 19
    chunks  [3]   [1 2 5]   (dropped: 1 token)   [4 4] [4]   [8] [8] [3]   (19 cut into 8 8 3)

The greedy loop runs in fairseq's compiled ``TokenBlockDataset`` helper (``complete_doc``
mode, whose document separator is a size-0 item); everything else is numpy. A chunk is kept
as four integers (first line, offset in it, last line, end offset in it) and its length, each
int32 (line numbers int64 past 2**31 lines; fairseq's index holds a line's size as int32, so
offsets and lengths fit): memory per data-bin line is what the blocks of ``BLOCK_LINES`` lines
need while building and nothing after it but the chunks (20 bytes a chunk), so a 20M-line shard
is indexed in about a second.
"""
from typing import NamedTuple

import numpy as np
from fairseq.data.token_block_utils_fast import _get_slice_indices_fast


class DocumentIndex(NamedTuple):
    first_line: np.ndarray  # [C] int32 (int64 past 2**31 lines)
    first_offset: np.ndarray  # [C] int32, token offset (EOS excluded) in first_line
    last_line: np.ndarray
    end_offset: np.ndarray  # exclusive, in last_line
    lengths: np.ndarray  # [C] int32, tokens of each chunk
    documents: int
    short_documents: int  # fewer than 2 tokens: skipped
    long_sentences: int  # longer than max_tokens: cut into pieces

    def __len__(self):
        return len(self.lengths)

    def pieces(self, i, line_tokens, max_tokens):
        """(line, start, end) of chunk ``i``'s sentences (a long sentence's pieces apart).
        ``line_tokens(line)``: tokens of that line without EOS."""
        first, last = int(self.first_line[i]), int(self.last_line[i])
        out = []
        for line in range(first, last + 1):
            a = int(self.first_offset[i]) if line == first else 0
            b = int(self.end_offset[i]) if line == last else line_tokens(line)
            out.extend((line, s, min(s + max_tokens, b)) for s in range(a, b, max_tokens))
        return out


BLOCK_LINES = 1 << 22  # lines indexed at a time: temporaries stay ~80 MB whatever the corpus


def build_document_index(sizes, max_tokens, block_lines=BLOCK_LINES):
    """``sizes``: data-bin item sizes (EOS included, so a blank line has size 1). The lines are
    indexed in blocks cut after a blank line (packing restarts at every document, so the blocks
    give the same chunks as one pass; a block only grows past ``block_lines`` inside a document
    that long)."""
    sizes = np.asarray(sizes)
    line_dtype = np.int32 if len(sizes) <= np.iinfo(np.int32).max else np.int64
    blocks, start = [], 0
    while start < len(sizes):
        end = min(start + block_lines, len(sizes))
        while end < len(sizes):  # extend to just after the next blank line
            blank = np.flatnonzero(sizes[end:end + block_lines] <= 1)
            if len(blank):
                end += int(blank[0]) + 1
                break
            end = min(end + block_lines, len(sizes))
        blocks.append(_index_block(sizes[start:end], max_tokens, start, line_dtype))
        start = end
    if not blocks:
        blocks.append(_index_block(sizes[:0], max_tokens, 0, line_dtype))
    arrays = [np.concatenate([b[i] for b in blocks]) for i in range(5)]
    counts = [sum(b[i] for b in blocks) for i in range(5, 8)]
    return DocumentIndex(*arrays, *counts)


def _index_block(sizes, max_tokens, line_offset, line_dtype):
    n = sizes.astype(np.int64)
    n -= 1
    np.maximum(n, 0, out=n)  # tokens per line without EOS; 0 = a document boundary
    is_text = n > 0
    prev_blank = np.concatenate([[True], ~is_text[:-1]])
    next_blank = np.concatenate([~is_text[1:], [True]])
    documents = int(np.count_nonzero(is_text & prev_blank))
    # a document of fewer than 2 tokens is one line of 1 token between blank lines
    short = int(np.count_nonzero((n == 1) & prev_blank & next_blank))
    del is_text, prev_blank, next_blank
    long_lines = n > max_tokens
    long_sentences = int(np.count_nonzero(long_lines))
    if long_sentences:  # cut long sentences into pieces of max_tokens (the last one shorter)
        k = np.where(long_lines, -(-n // max_tokens), 1)
        line_of = np.repeat(np.arange(len(n)), k)
        rank = np.arange(len(line_of)) - np.repeat(np.cumsum(k) - k, k)
        piece_sizes = np.minimum(n[line_of] - rank * max_tokens, max_tokens)
        del k, line_of, rank
    else:
        piece_sizes = n
    del long_lines
    # [C, 2] token ranges, in the concatenation of all lines without EOS; chunks < 2 tokens dropped
    try:
        slices = _get_slice_indices_fast(piece_sizes, "complete_doc", max_tokens, 0).reshape(-1, 2)
    except ValueError as e:  # fairseq's helper cannot return an empty list (no chunk of 2 tokens)
        if "size 0" not in str(e):
            raise
        slices = np.zeros((0, 2), dtype=np.int64)
    del piece_sizes
    ends = np.cumsum(n, out=n)  # running token count at each line's end (n is reused)
    first_line = np.searchsorted(ends, slices[:, 0], side="right")
    last_line = np.searchsorted(ends, slices[:, 1] - 1, side="right")

    def start_of(lines):
        return np.where(lines > 0, ends[np.maximum(lines - 1, 0)], 0)

    # compact before the blocks are joined: what is held is 20 bytes a chunk, not 40
    return ((first_line + line_offset).astype(line_dtype), (slices[:, 0] - start_of(first_line)).astype(np.int32),
            (last_line + line_offset).astype(line_dtype), (slices[:, 1] - start_of(last_line)).astype(np.int32),
            (slices[:, 1] - slices[:, 0]).astype(np.int32), documents, short, long_sentences)
