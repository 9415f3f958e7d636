"""WordPiece tokenisation: text -> the fairseq symbols of the pieces ``transformers.BertTokenizer``
produces, one output line per input line (blank stays blank). The data recipes use its ids through
``data/text_to_databin.py``; the hub and the tests use the symbols.

Pieces are written as the converted dictionary's symbols (``[CLS]`` -> ``<s>``, ``[UNK]`` ->
``<unk>``, ...), not as BERT spells them, so ``fairseq-preprocess --srcdict dict.txt`` gives
every piece the row the converted model has for it: ids equal the tokenizer's, permuted.
"""
from . import vocab as vocab_mod


def bert_tokenizer(vocab_path, cased):
    from transformers import BertTokenizer

    return BertTokenizer(vocab_path, do_lower_case=not cased)


class WordPieceEncoder:
    def __init__(self, vocab_path, cased=None):
        tokens = vocab_mod.read_vocab(vocab_path)
        self.mapping = vocab_mod.map_vocab(tokens)
        self.cased = vocab_mod.vocab_is_cased(tokens) if cased is None else cased
        self.tokenizer = bert_tokenizer(vocab_path, self.cased)
        self.symbol_of = self.mapping.row_symbols()

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
