"""A BERT WordPiece ``vocab.txt`` as the plugin's fairseq dictionary, and back.

fairseq's ``Dictionary`` owns rows 0-3 (``<s> <pad> </s> <unk>``) and the tasks append
``[MASK]`` and ``[P]`` after ``dict.txt`` (``load_pmlm_dictionary``). BERT keeps its special
tokens wherever its vocab put them (``[PAD]`` = 0, ``[UNK]`` = 100, ... in the released
uncased vocab). So the fairseq order is:

    <s>=[CLS]  <pad>=[PAD]  </s>=[SEP]  <unk>=[UNK]  every other vocab token in vocab order  [MASK]  [P]

and ``rows[i]`` says which vocab row feeds fairseq row ``i`` (embedding and output bias are
permuted with it). ``[P]`` has no row in BERT's vocab: it is initialised from ``[MASK]``,
as s2s-ft does (its pseudo tokens *are* ``[MASK]`` ids). A vocab that already has ``[P]``
(one exported from here) keeps its own row, so export -> import is the identity.

A vocab token that fairseq cannot hold under its own name (empty, holding whitespace --
``fairseq-preprocess`` splits lines on it --, spelled like a fairseq special symbol, or a
duplicate -- the tokenizer only ever produces its last copy) can never be produced by the
tokenizer as a separate piece; its row is kept under the placeholder ``[unreachable-ROW]``.
"""
from collections import Counter
from dataclasses import dataclass
from typing import List

from ..symbols import MASK_SYMBOL, PSEUDO_SYMBOL

# BERT special token -> the fairseq symbol that plays its part (SOS, pad, EOS, unk)
BERT_TO_FAIRSEQ = {"[CLS]": "<s>", "[PAD]": "<pad>", "[SEP]": "</s>", "[UNK]": "<unk>"}
FAIRSEQ_TO_BERT = {v: k for k, v in BERT_TO_FAIRSEQ.items()}
FAIRSEQ_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # fairseq Dictionary() rows 0..3
REQUIRED = ["[CLS]", "[SEP]", "[PAD]", "[UNK]", MASK_SYMBOL]


def placeholder(row):
    return f"[unreachable-{row}]"


def read_tokenizer_json(path):
    """A Hugging Face ``tokenizer.json`` of a WordPiece model -> (tokens in id order, lowercase
    or None). Released models often ship only this file: it holds the same vocabulary as a
    vocab.txt, as a token -> id map, plus the normaliser that says whether text is lower-cased."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable tokenizer.json ({type(e).__name__})") from None
    model = spec.get("model") or {}
    if model.get("type") != "WordPiece":
        raise ValueError(f"{path}: a {model.get('type') or 'unknown'} tokenizer, not WordPiece "
                         "(only BERT-style WordPiece vocabularies convert)")
    ids = model.get("vocab") or {}
    if sorted(ids.values()) != list(range(len(ids))):
        raise ValueError(f"{path}: the WordPiece ids are not 0..{len(ids) - 1}")
    normalizer = spec.get("normalizer") or {}
    return sorted(ids, key=ids.get), normalizer.get("lowercase")


def read_vocab(path):
    """vocab.txt (or a WordPiece tokenizer.json) -> list of tokens (row = line number, as
    BERT's tokenizer reads it)."""
    if str(path).endswith(".json"):
        return read_tokenizer_json(path)[0]
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    if tokens and tokens[-1] == "":  # a final newline is not a token
        tokens.pop()
    if not tokens:
        raise ValueError(f"{path}: the vocabulary is empty")
    return tokens


def vocab_is_cased(tokens):
    """An uncased WordPiece vocab has no token with an upper-case letter outside the
    bracketed specials ([CLS], [unused0], ...): that is how the casing is read when
    no tokenizer_config.json says ``do_lower_case``."""
    return any(t != t.lower() for t in tokens if not (t.startswith("[") and t.endswith("]")))


@dataclass
class VocabMapping:
    symbols: List[str]  # the fairseq dictionary, row by row, [MASK] and [P] included
    rows: List[int]  # rows[i]: the vocab row that feeds fairseq row i
    pseudo_from_mask: bool  # True when [P] had no row of its own and copies [MASK]
    placeholders: int  # vocab tokens kept under an [unreachable-ROW] name

    def row_symbols(self):
        """For each vocab row, the fairseq symbol it became (the data recipe writes these,
        so ``fairseq-preprocess --srcdict dict.txt`` maps every piece to its converted row)."""
        out = [None] * (max(self.rows) + 1)
        for symbol, row in zip(self.symbols, self.rows):
            if out[row] is None:  # [P] copied from [MASK] shares [MASK]'s row: keep [MASK]
                out[row] = symbol
        return out

    def keep(self, vocab_rows):
        """The same mapping cut to the vocab rows in ``vocab_rows`` (plus fairseq's 4 specials,
        [MASK] and [P]): a dictionary of only the pieces a corpus uses. The tokenizer keeps the
        whole vocab; a piece outside the cut becomes <unk> when the data is binarized."""
        head, tail = len(FAIRSEQ_SPECIALS), 2
        kept = [(s, r) for s, r in zip(self.symbols[head:-tail], self.rows[head:-tail]) if r in vocab_rows]
        symbols = self.symbols[:head] + [s for s, _ in kept] + self.symbols[-tail:]
        rows = self.rows[:head] + [r for _, r in kept] + self.rows[-tail:]
        return VocabMapping(symbols, rows, self.pseudo_from_mask, sum(s.startswith("[unreachable-") for s, _ in kept))

    def dict_txt(self):
        """dict.txt content: everything but fairseq's 4 specials and the task's 2 symbols,
        so that ``load_pmlm_dictionary`` rebuilds ``symbols`` exactly (no padding to a
        multiple of 8: ``Dictionary.load`` never pads)."""
        return "".join(f"{s} 1\n" for s in self.symbols[4:-2])


def map_vocab(tokens):
    """The fairseq order of a BERT vocab (see the module docstring)."""
    missing = [t for t in REQUIRED if t not in tokens]
    if missing:
        raise ValueError(f"the vocabulary lacks the special token(s) {', '.join(missing)}")
    last = {t: i for i, t in enumerate(tokens)}  # the row the tokenizer actually uses
    head = [last[t] for t in ("[CLS]", "[PAD]", "[SEP]", "[UNK]")]
    mask_row, pseudo_row = last[MASK_SYMBOL], last.get(PSEUDO_SYMBOL)
    taken = set(head) | {mask_row} | ({pseudo_row} if pseudo_row is not None else set())
    symbols, rows, n_placeholders = list(FAIRSEQ_SPECIALS), list(head), 0
    for i, t in enumerate(tokens):
        if i in taken:
            continue
        reachable = t and t.split() == [t] and t not in FAIRSEQ_SPECIALS and last[t] == i
        if not reachable:
            t, n_placeholders = placeholder(i), n_placeholders + 1
        symbols.append(t)
        rows.append(i)
    if len(set(symbols)) != len(symbols):
        raise ValueError("the vocabulary spells a token like a placeholder [unreachable-N]")
    symbols += [MASK_SYMBOL, PSEUDO_SYMBOL]
    rows += [mask_row, mask_row if pseudo_row is None else pseudo_row]
    return VocabMapping(symbols, rows, pseudo_row is None, n_placeholders)


def symbols_to_vocab(symbols, original=None):
    """Export: the fairseq dictionary as vocab.txt tokens and, for each, its fairseq row.

    Without ``original`` the fairseq order is kept and only the 4 specials are renamed
    ([P] stays as a token of its own, so re-importing gives back the same rows). With the
    ``original`` vocab.txt tokens of an imported model, its order is restored (a drop-in
    for the original tokenizer); rows it lacks ([P]) are appended."""
    if original is None:
        names = [FAIRSEQ_TO_BERT.get(s, s) for s in symbols]
        clash = sorted(n for n, count in Counter(names).items() if count > 1)
        if clash:
            raise ValueError(f"the dictionary holds {clash[0]!r} besides the fairseq symbol renamed to it")
        return names, list(range(len(symbols)))
    mapping = map_vocab(original)
    if mapping.symbols != list(symbols):
        raise ValueError("the given vocab.txt is not the one this model's dictionary was made from")
    names, order = list(original), [None] * len(original)
    for fairseq_row, vocab_row in enumerate(mapping.rows):
        if not (mapping.pseudo_from_mask and mapping.symbols[fairseq_row] == PSEUDO_SYMBOL):
            order[vocab_row] = fairseq_row
    if mapping.pseudo_from_mask:
        names.append(PSEUDO_SYMBOL)
        order.append(symbols.index(PSEUDO_SYMBOL))
    return names, order


def uncut_vocab(symbols, original):
    """Export of a dictionary that keeps only some rows of the vocab.txt ``original`` it was made
    from (an import with --keep-pieces-of), in ``original``'s order, so that a tokenizer reading the
    export's vocab.txt splits words as the plugin's does (which tokenises with the whole vocab and
    maps a dropped piece to <unk>): (names, order), ``order[i]`` the fairseq row of ``names[i]``,
    -1 for a row the cut dropped. ``[P]`` is appended when ``original`` has no row for it."""
    mapping = map_vocab(original)
    index = {s: i for i, s in enumerate(symbols)}
    if len(index) != len(symbols) or [s for s in mapping.symbols if s in index] != list(symbols):
        raise ValueError("the tokenizer's vocab.txt is not the one this model's dictionary was made from")
    names = list(original)
    order = [index.get(s, -1) for s in mapping.row_symbols()]
    if mapping.pseudo_from_mask:
        names.append(PSEUDO_SYMBOL)
        order.append(index[PSEUDO_SYMBOL])
    return names, order


def write_vocab(path, tokens):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))

