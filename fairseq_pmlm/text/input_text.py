"""Raw text from outside (fairseq-interactive's stdin, the hub's strings) on its way to the
tokenizer. Python turns bytes that are not UTF-8 into lone surrogates (stdin's ``surrogateescape``)
and sentencepiece raises on them, which ended a whole interactive session or hub call; such
characters are replaced by U+FFFD (the tokenizer's unknown piece) with a warning, and decoding
goes on."""
import io
import logging
import os
import re
import sys

logger = logging.getLogger(__name__)

SURROGATES = re.compile("[\ud800-\udfff]")


def valid_unicode(text):
    """``text`` with every lone surrogate replaced by U+FFFD (a warning says how many)."""
    clean, n = SURROGATES.subn("\ufffd", text)
    if n:
        logger.warning(f"replaced {n} character(s) that are not valid Unicode (bytes that are not UTF-8) by U+FFFD")
    return clean


class ValidUnicodeBPE:
    """A fairseq BPE whose ``encode`` accepts any str (``valid_unicode`` first); everything else
    is the wrapped BPE's."""

    def __init__(self, bpe):
        self.bpe = bpe

    def encode(self, x):
        return self.bpe.encode(valid_unicode(x))

    def __getattr__(self, name):
        return getattr(self.bpe, name)


def tolerant_stdin():
    """Read sys.stdin as the C.UTF-8 locale does (``surrogateescape``) under a strict UTF-8 locale
    too: fairseq-interactive's reader would otherwise stop at the first byte that is not UTF-8,
    before any line reaches ``valid_unicode``. A closed stdin (``<&-``: ``sys.stdin`` is None)
    reads as an empty one, as ``/dev/null`` does, not an AttributeError inside ``fileinput``."""
    if sys.stdin is None:
        sys.stdin = open(os.devnull, encoding="utf-8")
    if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors == "strict":
        sys.stdin.reconfigure(errors="surrogateescape")
