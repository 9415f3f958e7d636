"""Span logits of an example's windows -> its answer text (BERT's SQuAD post-processing).

Candidates are the n-best starts x n-best ends of each window with start <= end, at most
``max_answer_len`` tokens, starting at a token that has its most context in that window.
The text is the original passage between the first token's first character and the last
token's last character. SQuAD v2.0: the no-answer score is the smallest [SOS] start+end
score over the windows; ``null_odds`` = no-answer score - best span score, and the answer
is "" when it exceeds ``null_threshold`` (the official script's best threshold applies to
these odds).
"""
import torch


def best_answer(example, encoded, features, logits, n_best=20, max_answer_len=30, version_2=False,
                null_threshold=0.0):
    """``features``: the example's windows; ``logits``: their (start [T], end [T]) tensors.
    -> (text, null_odds)."""
    best, null = None, None
    for f, (start, end) in zip(features, logits):
        o, n = f.passage_offset, f.window_len
        if version_2:
            score = float(start[0] + end[0])
            null = score if null is None else min(null, score)
        if n == 0:
            continue
        s_log, e_log = start[o:o + n], end[o:o + n]
        starts = torch.topk(s_log, min(n_best, n)).indices.tolist()
        ends = torch.topk(e_log, min(n_best, n)).indices.tolist()
        for s in starts:
            if not f.max_context[s]:
                continue
            for e in ends:
                if e < s or e - s + 1 > max_answer_len:
                    continue
                score = float(s_log[s] + e_log[e])
                if best is None or score > best[0]:
                    best = (score, f.window_start + s, f.window_start + e)
    if best is None:
        return "", float("inf")
    a, b = encoded.passage.char_span(best[1], best[2])
    text = example.context[a:b]
    if not version_2:
        return text, float("-inf")
    odds = null - best[0]
    return ("" if odds > null_threshold else text), odds
