"""``--no-repeat-ngram-size`` that blocks repeats again, and can exempt words as s2s-ft does.

This fairseq build's Python n-gram blocker (the path every CPU run and every GPU without the
CUDA extension takes) reads the n-gram to check from the end of the whole ``tokens`` buffer,
which is padding until the last step, so it never bans anything (fairseq issues #4709, #5206).
This one reads only the tokens decoded so far, as fairseq's blocker did before that change, and
never bans the start symbol (fairseq's EOS at position 0, not a decoded token): for
``--no-repeat-ngram-size 1`` that ban was EOS's, so no hypothesis could end and the generator
stopped on an AssertionError at the length limit.

``ignore`` (the task's ``--no-repeat-ngram-ignore``, s2s-ft's ``--forbid_ignore_word``): an
n-gram holding one of these token ids is never banned. Size 3, ``.`` ignored:

    decoded "a b c . a b"  ->  "c" banned ("a b c" again)
    decoded "a b . a b"    ->  "." allowed ("a b ." holds ".")
    decoded "x . y x ."    ->  nothing banned (every trigram it could complete holds ".")
"""
import math

from fairseq.ngram_repeat_block import NGramRepeatBlock


class PrefixNGramRepeatBlock(NGramRepeatBlock):
    def __init__(self, size, ignore=()):
        super().__init__(size, use_extension=False)
        self.ignore = frozenset(ignore)

    def _no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        n = self.no_repeat_ngram_size
        for row, seq in enumerate(tokens[:, : step + 1].tolist()):
            tail = seq[len(seq) - n + 1 :]  # the n-1 newest tokens: what the next one would extend
            if self.ignore.intersection(tail):
                continue  # every n-gram this row could complete holds an ignored token
            # only n-grams ending in a decoded token (i + n - 1 >= 1): the start symbol is no text
            banned = [seq[i + n - 1] for i in range(max(0, 2 - n), len(seq) - n + 1) if seq[i : i + n - 1] == tail]
            banned = [t for t in banned if t not in self.ignore]
            if banned:
                lprobs[row, banned] = -math.inf
        return lprobs


def fix_repeat_ngram_blocker(generator, ignore=()):
    """Swap the blocker of a fairseq SequenceGenerator (in place) and return the generator: the
    Python one always, the CUDA extension's only where words are exempt (it cannot exempt them)."""
    blocker = getattr(generator, "repeat_ngram_blocker", None)
    if blocker is not None and (ignore or not blocker.use_extension):
        generator.repeat_ngram_blocker = PrefixNGramRepeatBlock(blocker.no_repeat_ngram_size, ignore)
    return generator
