"""Lines of text -> tokeniser ids, in batches, for the data-bin engine (``data/databin/``), and
those ids -> the rows of a fairseq dictionary.

Both tokenisers give the sentence separator [X_SEP] (multi-sentence targets: CNN/DailyMail) one
id of its own, the last one (``sep_id``), whatever the tokeniser would make of the text
"[X_SEP]": the text between separators is encoded piece by piece. ``lookup_table`` sends that id
to the dictionary's separator row (``symbols.separator_symbol``). ``pieces()`` names every id as
``fairseq-preprocess`` would have seen it, so a dictionary of those names (or a given one) numbers
the ids as the old route (tokeniser pieces -> ``fairseq-preprocess``) did.
"""
import numpy as np

from ..symbols import SENTENCE_SEP, separator_symbol
from .wordpiece import WordPieceEncoder


def encode_sentences(encode, lines, sep_id):
    """``encode`` of ``lines``, each separator between two sentences becoming ``sep_id``."""
    if not any(SENTENCE_SEP in line for line in lines):
        return encode(lines)
    pieces = [line.split(SENTENCE_SEP) for line in lines]
    flat = iter(encode([p for line in pieces for p in line]))
    out = []
    for line in pieces:
        ids = list(next(flat))
        for _ in line[1:]:
            ids += [sep_id] + list(next(flat))
        out.append(ids)
    return out


class SentencePieceIds:
    """sentencepiece ids; ``piece(i)`` names them as fairseq-preprocess would have seen them."""

    def __init__(self, model):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=model)
        self.sep_id = self.sp.get_piece_size()
        self.size = self.sep_id + 1

    def encode(self, lines):
        return encode_sentences(self._encode, lines, self.sep_id)

    def _encode(self, lines):
        stripped = [line.strip() for line in lines]
        return self.sp.encode(stripped, out_type=int, num_threads=1)

    def pieces(self):
        return [self.sp.id_to_piece(i) for i in range(self.sep_id)] + [SENTENCE_SEP]


class WordPieceIds:
    """BERT WordPiece ids (transformers' BertTokenizer, the Rust ``tokenizers`` backend);
    ``pieces()`` are the converted dictionary's symbols of those ids."""

    def __init__(self, vocab_path, cased):
        enc = WordPieceEncoder(vocab_path, cased)
        self.cased, self.mapping = enc.cased, enc.mapping
        self.backend = enc.tokenizer.backend_tokenizer
        self.backend.no_truncation()
        self.backend.no_padding()
        self.symbols = enc.symbol_of
        self.sep_id = len(self.symbols)
        self.size = self.sep_id + 1

    def encode(self, lines):
        return encode_sentences(self._encode, lines, self.sep_id)

    def _encode(self, lines):
        ids = [[] for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        # encode_batch_fast skips the character offsets we do not use (30 % faster)
        encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
        for i, e in zip(todo, encode([lines[i] for i in todo], add_special_tokens=False)):
            ids[i] = e.ids
        return ids

    def pieces(self):
        return list(self.symbols) + [SENTENCE_SEP]


def make_tokenizer(spec):
    """``spec``: ("spm", spm.model, None) or ("wp", vocab.txt, cased: True/False/None = from the vocab)."""
    kind, path, cased = spec
    return SentencePieceIds(path) if kind == "spm" else WordPieceIds(path, cased)


def lookup_table(pieces, dictionary):
    """tokeniser id -> dictionary row (pieces the dictionary lacks -> <unk>, the sentence separator
    -> the dictionary's separator row); EOS last."""
    sep = separator_symbol(dictionary.symbols) or SENTENCE_SEP
    table = np.array([dictionary.index(sep if p == SENTENCE_SEP else p) for p in pieces] + [dictionary.eos()],
                     dtype=np.int64)
    return table
