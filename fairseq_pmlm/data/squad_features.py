"""SQuAD examples -> model inputs ``[SOS] question [EOS] passage-window [EOS]`` (docs/DESIGN.md §6).

A passage longer than the room left after the question is split into overlapping windows
whose starts are ``doc_stride`` tokens apart (BERT's recipe), so every passage token is in
some window; a token seen by several windows is scored in the one where it has the most
context on both sides (``max_context``). Targets are token indices in the whole input; an
unanswerable question, or an answer outside a window, points at [SOS] (index 0).
"""
from dataclasses import dataclass
from typing import List, Optional

from .span_alignment import AlignedTokens, align


@dataclass
class SquadFeature:
    example_index: int
    tokens: List[int]          # dictionary ids of the whole input
    passage_offset: int        # input index of the window's first passage token
    window_start: int          # passage token index of that token
    window_len: int
    max_context: List[bool]    # per window token: this window gives it the most context
    start: int = 0             # target input indices (0 = [SOS]: no answer here)
    end: int = 0


def windows(n, room, stride):
    """[(start, length)] over ``n`` passage tokens, ``room`` tokens at most each, starts
    ``stride`` apart; the last one reaches the end."""
    if room < 1 or stride < 1:
        raise ValueError(f"no room for the passage (room {room}, stride {stride}): raise --max-positions "
                         "or lower --max-query-len")
    spans, start = [], 0
    while True:
        length = min(room, n - start)
        spans.append((start, length))
        if start + length >= n:
            return spans
        start += min(length, stride)


def max_context(spans, i, token):
    """Is window ``i`` the one where passage ``token`` has the most context (BERT's score:
    min(left, right) + 0.01 * length; ties go to the earlier window)?"""
    best, best_score = None, None
    for j, (s, n) in enumerate(spans):
        if not s <= token < s + n:
            continue
        score = min(token - s, s + n - 1 - token) + 0.01 * n
        if best_score is None or score > best_score:
            best, best_score = j, score
    return best == i


@dataclass
class EncodedExample:
    question: List[int]
    passage: AlignedTokens
    passage_ids: List[int]
    answer: Optional[tuple]  # (first, last) passage token of the target answer, None if none


def encode_example(ex, sp, dictionary, max_query_len, training):
    q = [dictionary.index(p) for p in sp.encode(ex.question, out_type=str)][:max_query_len]
    passage = align(sp, ex.context)
    ids = [dictionary.index(p) for p in passage.pieces]
    answer = None
    if training and not ex.is_impossible:
        text, start = ex.answers[0]
        answer = passage.token_span(start, start + len(text))
    return EncodedExample(q, passage, ids, answer)


def make_features(example_index, enc, dictionary, max_positions, doc_stride):
    bos, eos = dictionary.bos(), dictionary.eos()
    room = max_positions - len(enc.question) - 3
    spans = windows(len(enc.passage_ids), room, doc_stride)
    feats = []
    for i, (s, n) in enumerate(spans):
        offset = len(enc.question) + 2
        f = SquadFeature(
            example_index, [bos] + enc.question + [eos] + enc.passage_ids[s:s + n] + [eos], offset, s, n,
            [max_context(spans, i, t) for t in range(s, s + n)],
        )
        if enc.answer is not None and s <= enc.answer[0] and enc.answer[1] < s + n:
            f.start, f.end = offset + enc.answer[0] - s, offset + enc.answer[1] - s
        feats.append(f)
    return feats
