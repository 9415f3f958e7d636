"""The data-bin engine's dictionary: the one ``fairseq-preprocess`` would build from the
tokenised text (sentencepiece data made here), or a given ``dict.txt`` (``--srcdict``, the
pre-training dictionary of pairs, a WordPiece vocabulary's converted dictionary) checked against
the tokeniser."""
import io

import numpy as np
from fairseq.data import Dictionary

from ...symbols import SENTENCE_SEP
from . import PrepareError


def dictionary_from_counts(pieces, counts, eos_code):
    """fairseq-preprocess's dictionary of these piece counts (``--thresholdsrc 0``)."""
    d = Dictionary()
    for i in np.flatnonzero(counts[:eos_code]):
        d.add_symbol(pieces[i], int(counts[i]))
    # a row for the sentence separator even where the text has none, so that a model pre-trained
    # on it can be fine-tuned on multi-sentence targets (count 0: after every piece of the text)
    d.add_symbol(SENTENCE_SEP, 0)
    d.add_symbol(d.eos_word, int(counts[eos_code]))
    d.finalize(threshold=0, nwords=-1, padding_factor=8)
    return d


def load_dictionary(path):
    try:
        return Dictionary.load(path)
    except (ValueError, RuntimeError, UnicodeDecodeError) as e:
        raise PrepareError(f"{path}: not a fairseq dict.txt ({str(e).splitlines()[0] if str(e) else e})") from None


def load_dictionary_text(text):
    return Dictionary.load(io.StringIO(text))


def check_reserved(dictionary, name):
    """A text piece spelled like the task's symbols ([MASK], [P], which it appends) would become them."""
    for reserved in ("[MASK]", "[P]"):
        if dictionary.indices.get(reserved, -1) >= dictionary.nspecial:
            raise PrepareError(f"{name} already holds {reserved} (the task appends it to dict.txt itself)")


def check_dict_is_vocab_cut(dictionary, tok, srcdict, vocab):
    known = set(tok.pieces())
    extra = [s for s in dictionary.symbols[dictionary.nspecial:] if s not in known and not s.startswith("madeupword")]
    if extra:
        raise PrepareError(f"{srcdict} is not the dictionary of {vocab} (e.g. {extra[0]!r} is not one of its "
                           "pieces; use the dict.txt convert_checkpoint.py wrote beside it)")
