"""Passage text <-> tokens, with the character span of every token.

WordPiece (a tokenizer with ``encode_with_offsets``): the spans are the ones the tokenizer maps
each piece back to, also where it lowercased, stripped accents or split CJK characters off a word
("Montréal," -> "montreal" [0, 8) and "," [8, 9)).

sentencepiece: the passage is split at whitespace into words first (BERT's SQuAD recipe), each
word is encoded on its own (sentencepiece pieces never cross whitespace, so this equals encoding
the whole text), and each piece gets the character span it covers in the original text. When
sentencepiece's normalisation changed a word (NFKC folding, unknown characters), its pieces
cannot be placed inside it and all of them get the whole word's span: answers then still map
to original text, at word precision.

Offsets are Python string indices, as SQuAD's ``answer_start``.
"""
import re
from dataclasses import dataclass
from typing import List

WORD = re.compile(r"\S+")
SPACE = "\u2581"  # sentencepiece's word-start mark


@dataclass
class AlignedTokens:
    pieces: List[str]
    starts: List[int]  # char span [start, end) of each piece in the text
    ends: List[int]

    def __len__(self):
        return len(self.pieces)

    def char_span(self, first, last):
        """The text span [start, end) of tokens first..last (inclusive)."""
        return self.starts[first], self.ends[last]

    def token_span(self, start, end):
        """The tokens covering the text span [start, end): (first, last), or None when the span
        holds no token (only whitespace)."""
        first = next((i for i, e in enumerate(self.ends) if e > start), None)
        last = next((i for i in range(len(self.starts) - 1, -1, -1) if self.starts[i] < end), None)
        if first is None or last is None or last < first:
            return None
        return first, last


def align(sp, text):
    """Encode ``text`` with ``sp`` (a SentencePieceProcessor, or WordPiece's symbols: see the
    module's text); -> AlignedTokens."""
    if hasattr(sp, "encode_with_offsets"):
        pieces, spans = sp.encode_with_offsets(text)
        return AlignedTokens(pieces, [s for s, _ in spans], [e for _, e in spans])
    pieces, starts, ends = [], [], []
    for m in WORD.finditer(text):
        word, w0 = m.group(), m.start()
        ps = sp.encode(word, out_type=str)
        surface = [p.replace(SPACE, "") for p in ps]
        exact = "".join(surface) == word
        pos = w0
        for p, s in zip(ps, surface):
            pieces.append(p)
            if exact:
                starts.append(pos)
                pos += len(s)
                ends.append(pos)
            else:
                starts.append(w0)
                ends.append(m.end())
    return AlignedTokens(pieces, starts, ends)
