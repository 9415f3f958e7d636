"""ROUGE of multi-sentence summaries, as the summarisation papers score them (no fairseq import:
``scripts/score.py`` and the ``rouge`` scorer both use it).

**Sentences.** A summary is a list of sentences. In a one-example-a-line file they are separated
by ``[X_SEP]`` (``SENTENCE_SEP``: what the CNN/DailyMail data of ``scripts/s2s/get_data.py`` holds
and the model emits, as in Microsoft's s2s-ft) or by `` <S_SEP> `` (s2s-ft's reference files);
a ``.sentences`` file holds one sentence a line and a blank line after each example.

**ROUGE.** F1 in percent, averaged over the examples: ROUGE-1/2 on the whole summary, ROUGE-L on
the whole summary as one sequence (``rouge-score``'s ``rougeL``), ROUGE-Lsum the summary-level
LCS over the sentences (the union LCS of each reference sentence with every hypothesis
sentence), which is what ROUGE-1.5.5 reports as ROUGE-L for multi-sentence summaries (pyrouge,
files2rouge, s2s-ft's ``--perl``) and what the papers' "RG-L" for CNN/DailyMail is. With one
sentence per summary the two are equal. Tokens are ``rouge-score``'s (``tokenizer="rouge-score"``,
nltk's Porter stemmer) or ROUGE-1.5.5's own (``"rouge155"``, ``rouge155.py``).

**s2s-ft's post-processing** (``s2sft_hypothesis``), step for step as s2s-ft's evaluation
scripts treat a prediction before scoring it: CNN/DailyMail split at ``[X_SEP]``, each sentence
re-tokenised PTB-style (brackets -> ``-LRB-`` ..., quotes -> ````/''``, ``do n't``, ``'s``, ``3,000``,
``U.N.``, hyphenated words joined), sentences of at most 4 tokens dropped, a sentence whose word
set is more than 70 % inside the words of the sentences before it dropped, then the first 60
tokens kept; XSum: the same re-tokenisation without the bracket, quote and hyphen rules, round
brackets -> ``-LRB-``/``-RRB-``, one sentence, no truncation.
"""
import string

from ..symbols import SENTENCE_SEP
from . import rouge155

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
S2SFT_REF_SEP = "<S_SEP>"  # s2s-ft's CNN/DailyMail reference files: " <S_SEP> " between sentences
TOKENIZERS = ("rouge-score", "rouge155")


# ---------------------------------------------------------------- sentences
def sentences(text):
    """A summary's sentences: ``text`` split at ``[X_SEP]``, `` <S_SEP> `` and newlines; empty
    pieces dropped."""
    for sep in (SENTENCE_SEP, S2SFT_REF_SEP):
        text = text.replace(sep, "\n")
    return [s.strip() for s in text.split("\n") if s.strip()]


def as_sentences(example):
    return sentences(example) if isinstance(example, str) else [s.strip() for s in example if s.strip()]


def parse_sentence_blocks(lines):
    """Lines of a ``.sentences`` file -> one list of sentences per example (a blank line ends
    an example; an example without sentences is a blank line alone)."""
    examples, current = [], []
    for line in lines:
        if line.strip():
            current.append(line.strip())
        else:
            examples.append(current)
            current = []
    if current:  # a last example without its blank line
        examples.append(current)
    return examples


def sentence_blocks(examples):
    """The text of a ``.sentences`` file of these examples (lists of sentences)."""
    return "".join("".join(s + "\n" for s in ex) + "\n" for ex in examples)


# ---------------------------------------------------------------- ROUGE
def rouge_per_example(references, hypotheses, use_stemmer=True, tokenizer="rouge-score"):
    """F1 (%) of each (reference, hypothesis) pair: {ROUGE type: [score per example]}. An example
    is a string (split by ``sentences``) or a list of sentences."""
    from rouge_score import rouge_scorer

    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, not {tokenizer!r}")
    custom = rouge155.Tokenizer(use_stemmer) if tokenizer == "rouge155" else None
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer, tokenizer=custom)
    out = {name: [] for name in ROUGE_TYPES}
    for ref, hyp in zip(references, hypotheses):
        # newlines: rouge-score's rougeLsum splits there; for the others they are spaces
        scores = scorer.score("\n".join(as_sentences(ref)), "\n".join(as_sentences(hyp)))
        for name, score in scores.items():
            out[name].append(100 * score.fmeasure)
    return out


def rouge_scores(references, hypotheses, use_stemmer=True, tokenizer="rouge-score"):
    """Mean F1 (%) per ROUGE type, over the examples."""
    per = rouge_per_example(references, hypotheses, use_stemmer, tokenizer)
    return {name: sum(v) / max(len(v), 1) for name, v in per.items()}


# ---------------------------------------------------------------- s2s-ft's post-processing
_PTB_BRACKETS = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-"}


def _is_number_group(token):
    return all(ch.isdigit() or ch == "," for ch in token)  # "" too, as s2s-ft's test has it


def ptb_retokenize(text, dataset="cnndm"):
    """s2s-ft's re-tokenisation of a space-tokenised sentence (see the module docstring); XSum's
    variant lacks the bracket, double-quote, single-quote and hyphen rules."""
    full = dataset == "cnndm"
    tokens, out = text.split(), []
    open_double = open_single = False
    glue_next = False  # the previous token was a hyphen glued to the word before it
    i, n = 0, len(tokens)
    while i < n:
        tok, step, glued = tokens[i], 1, False
        nxt = tokens[i + 1] if i + 1 < n else None
        if full and tok in _PTB_BRACKETS:
            out.append(_PTB_BRACKETS[tok])
        elif full and tok == '"':
            out.append("''" if open_double else "``")
            open_double = not open_double
        elif tok == "'" and out and out[-1].endswith("n") and nxt == "t":  # don ' t -> do n't
            out[-1] = out[-1][:-1]
            out.append("n't")
            step = 2
        elif tok == "'" and nxt in ("s", "d", "ll"):  # john ' s -> john 's
            out.append("'" + nxt)
            step = 2
        elif full and tok == "'":
            out.append("'" if open_single else "`")
            open_single = not open_single
        elif tok == "." and i + 2 < n and tokens[i + 1] == "." and tokens[i + 2] == ".":
            out.append("...")
            step = 3
        elif tok == "," and out and _is_number_group(out[-1]) and nxt is not None and _is_number_group(nxt):
            out[-1] += "," + nxt  # 3 , 000 -> 3,000
            step = 2
        elif tok == "." and out and out[-1].isdigit() and nxt is not None and nxt.isdigit():
            out[-1] += "." + nxt  # 3 . 03 -> 3.03
            step = 2
        elif (tok == "." and out and len(out[-1]) == 1 and out[-1].isupper() and i + 2 < n
              and len(tokens[i + 1]) == 1 and tokens[i + 1].isupper() and tokens[i + 2] == "."):
            # U . N . -> U.N.: the letters and dots that follow are appended, but only two tokens
            # are consumed (so the dot after N comes out again as a token of its own, as in s2s-ft)
            end = i + 3
            while end + 2 < n and len(tokens[end + 1]) == 1 and tokens[end + 1].isupper() and tokens[end + 2] == ".":
                end += 2
            out[-1] += "".join(tokens[i:end])
            step = 2
        elif full and tok == "-":
            if nxt == "-":
                out.append("--")
                step = 2
            elif nxt is None or i == 0:
                out.append("-")
            elif out[-1] not in string.punctuation and nxt[0] not in string.punctuation:
                out[-1] += "-"  # well - known -> well-known (the next word is glued on below)
                glued = True
            else:
                out.append("-")
        elif glue_next and out and tok[0] not in string.punctuation:
            out[-1] += tok
        else:
            out.append(tok)
        glue_next = glued
        i += step
    return " ".join(out)


def drop_repeated(sents, rate):
    """Sentences kept in order: one whose set of lower-cased words lies more than ``rate`` inside
    the words of all sentences before it (kept or not) is dropped."""
    kept, seen = [], set()
    for s in sents:
        words = set(s.lower().split())
        if len(words & seen) / len(words) <= rate:
            kept.append(s)
        seen |= words
    return kept


def truncate(sents, max_tokens):
    """The first ``max_tokens`` tokens of the sentences (the last one cut)."""
    out, left = [], max_tokens
    for s in sents:
        tokens = s.split()
        take = min(len(tokens), left)
        out.append(" ".join(tokens[:take]))
        left -= take
        if left <= 0:
            break
    return out


def s2sft_hypothesis(text, dataset="cnndm", trunc_len=None, duplicate_rate=0.7):
    """A prediction line as s2s-ft's evaluation scores it: its list of sentences (see the module
    docstring). ``trunc_len`` None means s2s-ft's default: 60 for CNN/DailyMail, none for XSum."""
    if trunc_len is None:
        trunc_len = 60 if dataset == "cnndm" else 0
    if dataset == "cnndm":
        kept = []
        for piece in text.strip().split(SENTENCE_SEP):
            s = ptb_retokenize(piece, "cnndm")
            for bracket, ptb in _PTB_BRACKETS.items():
                if bracket in "()[]":  # brackets inside tokens too (curly ones only as tokens)
                    s = s.replace(bracket, f" {ptb} ")
            s = " ".join(s.split())
            # (s2s-ft also skips a sentence whose word-overlap F1 with a kept one exceeds 1.0,
            # which its F1, whose denominator carries + 1e-5, never does: no step here)
            if len(s.split()) > 4:
                kept.append(s)
        if duplicate_rate and duplicate_rate < 1:
            kept = drop_repeated(kept, duplicate_rate)
    else:
        s = ptb_retokenize(text.strip(), "xsum").replace("(", " -LRB- ").replace(")", " -RRB- ")
        kept = [" ".join(s.split())]
    return truncate(kept, trunc_len) if trunc_len else kept


def s2sft_reference(text):
    """A reference line as s2s-ft's evaluation reads it: sentences at `` <S_SEP> `` (and at our
    ``[X_SEP]``)."""
    return sentences(text)
