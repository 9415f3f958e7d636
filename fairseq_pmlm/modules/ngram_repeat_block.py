"""``--no-repeat-ngram-size`` that blocks repeats again.

This fairseq build's Python n-gram blocker (the path every CPU run and every GPU without the
CUDA extension takes) reads the n-gram to check from the end of the whole ``tokens`` buffer,
which is padding until the last step, so it never bans anything (fairseq issues #4709, #5206).
This one reads only the tokens decoded so far, as fairseq's blocker did before that change, and
never bans the start symbol (fairseq's EOS at position 0, not a decoded token): for
``--no-repeat-ngram-size 1`` that ban was EOS's, so no hypothesis could end and the generator
stopped on an AssertionError at the length limit.
"""
import math

from fairseq.ngram_repeat_block import NGramRepeatBlock


class PrefixNGramRepeatBlock(NGramRepeatBlock):
    def _no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        n = self.no_repeat_ngram_size
        for row, seq in enumerate(tokens[:, : step + 1].tolist()):
            tail = seq[len(seq) - n + 1 :]  # the n-1 newest tokens: what the next one would extend
            # only n-grams ending in a decoded token (i + n - 1 >= 1): the start symbol is no text
            banned = [seq[i + n - 1] for i in range(max(0, 2 - n), len(seq) - n + 1) if seq[i : i + n - 1] == tail]
            if banned:
                lprobs[row, banned] = -math.inf
        return lprobs


def fix_repeat_ngram_blocker(generator):
    """Swap the blocker of a fairseq SequenceGenerator (in place) and return the generator."""
    blocker = getattr(generator, "repeat_ngram_blocker", None)
    if blocker is not None and not blocker.use_extension:
        generator.repeat_ngram_blocker = PrefixNGramRepeatBlock(blocker.no_repeat_ngram_size)
    return generator
