"""WordPiece tokenisation: text -> the fairseq symbols of the pieces ``transformers.BertTokenizer``
produces, one output line per input line (blank stays blank). The data recipes use its ids through
``token_ids.py`` (the data-bin engine); the hub and the tests use the symbols.

Pieces are written as the converted dictionary's symbols (``[CLS]`` -> ``<s>``, ``[UNK]`` ->
``<unk>``, ...), not as BERT spells them, so ``fairseq-preprocess --srcdict dict.txt`` gives
every piece the row the converted model has for it: ids equal the tokenizer's, permuted.

A special token's spelling in text is text: "[SEP]" -> "[", "sep", "]", as BERT's own tokenizer
splits it. transformers' default reads it as the control token, so a docstring that mentions
"[SEP]" put an [EOS] inside its line, and a SQuAD question one that shifted its segment ids
(and fairseq's ``--bpe bert``, used by the hub and fairseq-generate, gave it <unk>: now the same
pieces, runtime/bert_bpe.py). Markers meant as markers go in by id (the hub's ``fill_mask`` splits
its input at ``[MASK]``).
"""
import json

from . import vocab as vocab_mod


def bert_tokenizer(vocab_path, cased):
    from transformers import BertTokenizer

    return BertTokenizer(vocab_path, do_lower_case=not cased, split_special_tokens=True)


class WordPieceEncoder:
    def __init__(self, vocab_path, cased=None):
        tokens = vocab_mod.read_vocab(vocab_path)
        self.mapping = vocab_mod.map_vocab(tokens)
        self.cased = vocab_mod.vocab_is_cased(tokens) if cased is None else cased
        self.tokenizer = bert_tokenizer(vocab_path, self.cased)
        self.symbol_of = self.mapping.row_symbols()

    def encode_with_offsets(self, text):
        """``text`` -> (symbols, [(start, end)]): each piece's span of ``text`` as the tokenizer maps
        it back, also where it lowercased, stripped accents or split CJK characters off a word."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [self.symbol_of[r] for r in enc["input_ids"]], [tuple(o) for o in enc["offset_mapping"]]

    def encode_lines(self, lines):
        """Lines (without newlines) -> lines of space-separated fairseq symbols."""
        out = [""] * len(lines)
        todo = [i for i, line in enumerate(lines) if line.strip()]
        for start in range(0, len(todo), 1000):  # batches: the fast tokenizer's throughput
            chunk = todo[start:start + 1000]
            ids = self.tokenizer([lines[i] for i in chunk], add_special_tokens=False)["input_ids"]
            for i, row_ids in zip(chunk, ids):
                out[i] = " ".join(self.symbol_of[r] for r in row_ids)
        return out


def tokenizer_json(vocab_path, cased, names):
    """A Hugging Face ``tokenizer.json`` (text) that gives, on any text, the ids the plugin gives a
    model whose export lists its rows as ``names`` (its vocab.txt: line = id): WordPiece with the
    whole vocab ``vocab_path``, each piece then looked up among ``names``, a piece the model has no
    row for -> [UNK]. A vocab.txt of ``names`` alone cannot say that: for a dictionary cut to the
    pieces a corpus uses (import --keep-pieces-of), a tokenizer reading it splits a word whose
    piece was dropped into pieces that remain ("nearby" -> "near ##by" where the plugin has [UNK]).
    Several pieces then share [UNK]'s id, which tokenizers reads from a tokenizer.json (its
    specials, added tokens, decode by their own names)."""
    tokens = vocab_mod.read_vocab(vocab_path)
    spec = json.loads(bert_tokenizer(vocab_path, cased).backend_tokenizer.to_str())
    index = {n: i for i, n in enumerate(names)}
    unk = index["[UNK]"]
    ids = {}
    # the last row of a token listed twice is the one WordPiece gives (the plugin and transformers
    # alike; map_vocab names the earlier one unreachable): last first, so that it is the one kept
    for token, symbol in reversed(list(zip(tokens, vocab_mod.map_vocab(tokens).row_symbols()))):
        name = vocab_mod.FAIRSEQ_TO_BERT.get(symbol, symbol)
        ids.setdefault(token, index.get(name, index.get(token, unk)))
    for name, i in index.items():  # rows without a piece of their own ([P]): decodable by name
        ids.setdefault(name, i)
    spec["model"]["vocab"] = ids
    for added in spec.get("added_tokens") or []:
        added["id"] = index[added["content"]]
    for special in ((spec.get("post_processor") or {}).get("special_tokens") or {}).values():
        special["ids"] = [index[t] for t in special["tokens"]]
    return json.dumps(spec, ensure_ascii=False, indent=1)
