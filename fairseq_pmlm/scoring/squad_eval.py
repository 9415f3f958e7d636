"""The official SQuAD evaluation (v1.1 and v2.0 scripts), as functions.

Answers are normalised as the official scripts do: lowercase, drop punctuation, drop the
articles a/an/the, collapse whitespace. EM and F1 take the best over the gold answers.
v2.0: an unanswerable question's gold answer is the empty string; with per-question
no-answer scores (``null_odds``: higher = more likely no answer) the best threshold is the one
that maximises the score when every question above it is answered "" (``find_best_thresh``).
The functions are the v2.0 script's; on v1.1 data they give the v1.1 script's numbers except
for a gold answer that normalises to nothing (v1.1 keeps it, v2.0 drops it).
"""
import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s):
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def compute_exact(gold, pred):
    return int(normalize_answer(gold) == normalize_answer(pred))


def compute_f1(gold, pred):
    gold_toks, pred_toks = normalize_answer(gold).split(), normalize_answer(pred).split()
    if not gold_toks or not pred_toks:  # v2.0: "" vs "" is a match, "" vs text is not
        return float(gold_toks == pred_toks)
    same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
    if same == 0:
        return 0.0
    p, r = same / len(pred_toks), same / len(gold_toks)
    return 2 * p * r / (p + r)


def gold_answers(example):
    """v2.0's rule: gold texts that normalise to nothing are dropped; none left means ""."""
    golds = [text for text, _ in example.answers if normalize_answer(text)]
    return golds or [""]


def raw_scores(examples, predictions):
    """-> (exact, f1): dicts qid -> score of the questions that have a prediction."""
    exact, f1 = {}, {}
    for ex in examples:
        if ex.qid not in predictions:
            continue
        golds, pred = gold_answers(ex), predictions[ex.qid]
        exact[ex.qid] = max(compute_exact(g, pred) for g in golds)
        f1[ex.qid] = max(compute_f1(g, pred) for g in golds)
    return exact, f1


def find_best_thresh(predictions, scores, null_odds, has_answer):
    """The official v2.0 search: answer "" for every question whose no-answer score exceeds
    the threshold; -> (best score in %, best threshold)."""
    score = best = sum(1 for q in scores if not has_answer[q])
    thresh = 0.0
    for qid in sorted(null_odds, key=lambda q: null_odds[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        else:
            score += -1 if predictions[qid] else 0
        if score > best:
            best, thresh = score, null_odds[qid]
    return 100.0 * best / len(scores), thresh


def evaluate(examples, predictions, null_odds=None):
    """The official numbers: exact, f1 (percent), total; with v2.0 data HasAns/NoAns splits;
    with ``null_odds`` also best_exact(_thresh), best_f1(_thresh)."""
    exact, f1 = raw_scores(examples, predictions)
    if not exact:
        raise ValueError("no question of the data set has a prediction")
    has_answer = {ex.qid: bool(ex.answers) for ex in examples}  # the official qid_to_has_ans
    v2 = any(ex.is_impossible for ex in examples)
    # a question without a prediction: v1.1's script scores it 0, v2.0's leaves it out
    total = len(exact) if v2 else len(examples)
    out = {"exact": 100.0 * sum(exact.values()) / total, "f1": 100.0 * sum(f1.values()) / total,
           "total": total, "missing": len(examples) - len(exact)}
    if v2:
        for name, want in (("HasAns", True), ("NoAns", False)):
            qids = [q for q in exact if has_answer[q] == want]
            if qids:
                out[f"{name}_exact"] = 100.0 * sum(exact[q] for q in qids) / len(qids)
                out[f"{name}_f1"] = 100.0 * sum(f1[q] for q in qids) / len(qids)
                out[f"{name}_total"] = len(qids)
        if null_odds is not None:
            out["best_exact"], out["best_exact_thresh"] = find_best_thresh(predictions, exact, null_odds, has_answer)
            out["best_f1"], out["best_f1_thresh"] = find_best_thresh(predictions, f1, null_odds, has_answer)
    return out
