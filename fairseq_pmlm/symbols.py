"""The symbols that tasks, models, criteria, data and weights share (no fairseq import, so the
recipes' fairseq-free helpers read them too).

- ``[MASK]`` and ``[P]``: appended to ``dict.txt``'s symbols by the tasks (never written into
  it); ``<mask>`` is what fairseq's own ``sentence_prediction`` appends at ``[MASK]``'s row;
- the span head's name, shared by the ``pmlm_squad`` task (which registers it) and criterion;
- which tokens a random replacement may draw (pre-training corruption and seq2seq word drop);
- ``[X_SEP]``, the sentence separator of multi-sentence targets (CNN/DailyMail highlights), as
  Microsoft's s2s-ft spells it: the data path keeps it one token, scoring splits summaries there.
"""
import re

import numpy as np

MASK_SYMBOL, PSEUDO_SYMBOL = "[MASK]", "[P]"
FAIRSEQ_MASK_SYMBOL = "<mask>"
SPAN_HEAD = "squad"
SENTENCE_SEP = "[X_SEP]"


def separator_symbol(symbols):
    """The dictionary symbol that carries ``SENTENCE_SEP``, or None: itself where the dictionary
    has a row for it (the sentencepiece dictionaries made here reserve one), else a BERT
    vocabulary's first ``[unusedN]`` row (rows BERT keeps for new tokens; the released
    vocabularies have no ``[X_SEP]``)."""
    if SENTENCE_SEP in symbols:
        return SENTENCE_SEP
    return next((s for s in symbols if re.fullmatch(r"\[unused\d+\]", s)), None)


def random_token_candidates(dictionary):
    """Every row of a fairseq ``Dictionary`` that is ordinary text: not one of its special
    symbols (``<s> <pad> </s> <unk>`` and any added before ``nspecial``), ``[MASK]`` or ``[P]``."""
    special = {dictionary.bos(), dictionary.eos(), dictionary.pad(), dictionary.unk()}
    special |= {i for i in (dictionary.index(s) for s in (MASK_SYMBOL, PSEUDO_SYMBOL)) if i != dictionary.unk()}
    return np.array([i for i in range(dictionary.nspecial, len(dictionary)) if i not in special], dtype=np.int64)
