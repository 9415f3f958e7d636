"""fairseq's SequenceGenerator with the decoding conventions of Microsoft's s2s-ft.

Three differences from the stock generator, each switched by the ``pmlm_seq2seq`` task:

- ``--lenpen-formula gnmt``: a finished hypothesis of L tokens (EOS included) scores
  ``sum(log p) / ((5 + L) / 6) ** lenpen`` (GNMT, as s2s-ft decodes and as the paper's lenpen
  values assume) instead of fairseq's ``sum(log p) / L ** lenpen``. For L = 10, lenpen 0.6:
  fairseq divides by 3.98, GNMT by 1.47, so short hypotheses are favoured much less by fairseq.
- tokens that are never text (``[P]``, ``[MASK]``, ``<s>``; ``<pad>`` is banned by fairseq
  itself) get probability 0, so no beam can end up emitting them.
- a ``--no-repeat-ngram-size`` blocker that works (modules/ngram_repeat_block.py).

And one that only keeps fairseq's meaning: ``--match-source-len`` counts the source's text, not the
``[SOS]`` our sources begin with (a source of 5 words gives hypotheses of 5 tokens and EOS, as
with a fairseq translation model).
"""
import math

from fairseq.sequence_generator import EnsembleModel, SequenceGenerator

from .modules.ngram_repeat_block import fix_repeat_ngram_blocker

LENPEN_FORMULAS = ("fairseq", "gnmt")


def gnmt_divisor(length, alpha):
    """((5 + L) / 6) ** alpha: the GNMT length normaliser of a hypothesis of L tokens."""
    return ((5 + length) / 6) ** alpha


class BannedTokensEnsemble(EnsembleModel):
    """fairseq's model wrapper, with log-probability -inf for ``banned`` token ids."""

    def __init__(self, models, banned):
        super().__init__(models)
        self.banned = sorted(set(banned))

    def forward_decoder(self, *args, **kwargs):
        lprobs, attn = super().forward_decoder(*args, **kwargs)
        if self.banned:
            lprobs[:, self.banned] = -math.inf
        return lprobs, attn


class PMLMSequenceGenerator(SequenceGenerator):
    def __init__(self, models, tgt_dict, lenpen_formula="fairseq", banned_tokens=(), **kwargs):
        if lenpen_formula not in LENPEN_FORMULAS:
            raise ValueError(f"--lenpen-formula must be one of {', '.join(LENPEN_FORMULAS)}, not {lenpen_formula!r}")
        super().__init__(models, tgt_dict, **kwargs)
        self.lenpen_formula = lenpen_formula
        self.alpha = self.len_penalty
        self.model = BannedTokensEnsemble(list(self.model.models), banned_tokens)
        self.model.eval()
        fix_repeat_ngram_blocker(self)

    def _generate(self, sample, *args, **kwargs):
        net = sample["net_input"]
        if self.match_source_len and "src_lengths" in net:
            # fairseq reads a source's length from src_lengths: ours count [SOS] too
            sample = {**sample, "net_input": {**net, "src_lengths": net["src_lengths"] - 1}}
        return super()._generate(sample, *args, **kwargs)

    def finalize_hypos(self, step, *args, **kwargs):
        if self.lenpen_formula == "gnmt":
            # fairseq divides by (step + 1) ** len_penalty, with L = step + 1 tokens (EOS
            # included); choose the exponent that turns it into ((5 + L) / 6) ** alpha
            length = step + 1
            self.len_penalty = 0.0 if length == 1 else math.log(gnmt_divisor(length, self.alpha)) / math.log(length)
        return super().finalize_hypos(step, *args, **kwargs)
