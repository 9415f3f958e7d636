"""WordPiece tokenisation for the data recipe: text -> the fairseq symbols of the pieces
``transformers.BertTokenizer`` produces, one output line per input line (blank stays blank).

Pieces are written as the converted dictionary's symbols (``[CLS]`` -> ``<s>``, ``[UNK]`` ->
``<unk>``, ...), not as BERT spells them, so ``fairseq-preprocess --srcdict dict.txt`` gives
every piece the row the converted model has for it: ids equal the tokenizer's, permuted.
"""
import argparse
import os

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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", required=True, help="BERT vocab.txt")
    p.add_argument("--case", choices=["auto", "cased", "uncased"], default="auto",
                   help="auto: uncased unless the vocab has upper-case tokens")
    p.add_argument("--dict-out", help="also write the dict.txt of this vocab (the converter's)")
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--outputs", nargs="+", required=True)
    a = p.parse_args(argv)
    if len(a.inputs) != len(a.outputs):
        p.error("--inputs and --outputs differ in length")
    enc = WordPieceEncoder(a.vocab, None if a.case == "auto" else a.case == "cased")
    print(f"wordpiece_encode: {'cased' if enc.cased else 'uncased'} WordPiece, {len(enc.symbol_of)} pieces")
    if a.dict_out:
        with open(a.dict_out, "w", encoding="utf-8") as f:
            f.write(enc.mapping.dict_txt())
    for src, dst in zip(a.inputs, a.outputs):
        with open(src, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
        with open(dst + ".tmp", "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in enc.encode_lines(lines)))
        os.replace(dst + ".tmp", dst)
