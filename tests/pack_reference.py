"""The pre-training example index as it was first written: a Python loop over every line.
Kept as the reference the vectorised ``fairseq_pmlm.data.document_index`` is tested against
(same chunks, same counts); too slow for corpora (about 1.5 us and 150 B per line)."""
import numpy as np


def pack_documents(sizes, max_tokens):
    """Greedily pack each document's sentences into chunks of at most ``max_tokens``.

    ``sizes``: per-line item sizes of a ``fairseq-preprocess`` dataset (each line ends with
    its EOS, so a blank line, i.e. a document boundary, has size 1). A sentence longer than
    ``max_tokens`` is split into pieces. Returns (pieces [K, 3] of (line, start, end),
    chunk_offsets [C + 1], stats dict).
    """
    # documents as lists of (line, start, end) pieces; long sentences cut into pieces
    documents, doc = [], []
    stats = {"documents": 0, "short_documents": 0, "long_sentences": 0}
    for line, size in enumerate(np.asarray(sizes).tolist() + [1]):  # sentinel boundary
        n = size - 1  # drop the EOS that fairseq-preprocess appended
        if n <= 0:
            if doc:
                documents.append(doc)
            doc = []
            continue
        stats["long_sentences"] += n > max_tokens
        doc.extend((line, s, min(n, s + max_tokens)) for s in range(0, n, max_tokens))

    pieces, offsets = [], [0]
    for doc in documents:
        stats["documents"] += 1
        if sum(e - s for _, s, e in doc) < 2:
            stats["short_documents"] += 1
            continue
        chunks, length = [[]], 0
        for piece in doc:
            n = piece[2] - piece[1]
            if length + n > max_tokens:
                chunks.append([])
                length = 0
            chunks[-1].append(piece)
            length += n
        for chunk in chunks:
            if sum(e - s for _, s, e in chunk) >= 2:  # S1 and S2 need a token each
                pieces.extend(chunk)
                offsets.append(len(pieces))
    return np.array(pieces, dtype=np.int64).reshape(-1, 3), np.array(offsets, dtype=np.int64), stats

