"""fairseq's SequenceGenerator with the decoding conventions of Microsoft's s2s-ft.

Five differences from the stock generator, each switched by the ``pmlm_seq2seq`` task:

- ``--lenpen-formula gnmt``: a finished hypothesis of L tokens (EOS included) scores
  ``sum(log p) / ((5 + L) / 6) ** lenpen`` (GNMT, as s2s-ft decodes and as the paper's lenpen
  values assume) instead of fairseq's ``sum(log p) / L ** lenpen``. For L = 10, lenpen 0.6:
  fairseq divides by 3.98, GNMT by 1.47, so short hypotheses are favoured much less by fairseq.
- tokens that are never text (``[P]``, ``[MASK]``, ``<s>``; ``<pad>`` is banned by fairseq
  itself) get probability 0, so no beam can end up emitting them.
- a ``--no-repeat-ngram-size`` blocker that works (modules/ngram_repeat_block.py), and with
  ``--no-repeat-ngram-ignore WORDS`` never bans an n-gram holding one of them (s2s-ft's
  ``--forbid_ignore_word .``).
- ``--eos-at-limit free``: a hypothesis still open at the length limit ends as it stands, as in
  s2s-ft: its score is its tokens' log-probabilities and its length L their count, with no
  EOS in either. fairseq forces EOS there, adds that EOS's log-probability (the model had not
  chosen to stop there) and counts it in L.
- ``--beam-search s2s-ft``: s2s-ft's beam search (beam_search_s2sft.py) instead of fairseq's.

And one that only keeps fairseq's meaning: ``--match-source-len`` counts the source's text, not the
``[SOS]`` our sources begin with (a source of 5 words gives hypotheses of 5 tokens and EOS, as
with a fairseq translation model).
"""
import math

from fairseq.sequence_generator import EnsembleModel, SequenceGenerator

from .beam_search_s2sft import s2sft_beam_search
from .modules.ngram_repeat_block import fix_repeat_ngram_blocker

LENPEN_FORMULAS = ("fairseq", "gnmt")
EOS_AT_LIMIT = ("forced", "free")
BEAM_SEARCHES = ("fairseq", "s2s-ft")


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
    def __init__(self, models, tgt_dict, lenpen_formula="fairseq", banned_tokens=(), ngram_ignore=(),
                 eos_at_limit="forced", beam_search="fairseq", **kwargs):
        for flag, value, choices in (("--lenpen-formula", lenpen_formula, LENPEN_FORMULAS),
                                     ("--eos-at-limit", eos_at_limit, EOS_AT_LIMIT),
                                     ("--beam-search", beam_search, BEAM_SEARCHES)):
            if value not in choices:
                raise ValueError(f"{flag} must be one of {', '.join(choices)}, not {value!r}")
        super().__init__(models, tgt_dict, **kwargs)
        self.lenpen_formula = lenpen_formula
        self.alpha = self.len_penalty
        self.free_eos_at_limit = eos_at_limit == "free"
        self.s2sft_search = beam_search == "s2s-ft"
        self.model = BannedTokensEnsemble(list(self.model.models), banned_tokens)
        self.model.eval()
        fix_repeat_ngram_blocker(self, ngram_ignore)

    def length_divisor(self, length):
        """What a hypothesis of ``length`` tokens' summed log-probability is divided by."""
        if not self.normalize_scores:
            return 1.0
        return gnmt_divisor(length, self.alpha) if self.lenpen_formula == "gnmt" else length ** self.alpha

    def _generate(self, sample, *args, **kwargs):
        if self.s2sft_search:
            return s2sft_beam_search(self, sample, *args, **kwargs)
        net = sample["net_input"]
        if self.match_source_len and "src_lengths" in net:
            # fairseq reads a source's length from src_lengths: ours count [SOS] too
            sample = {**sample, "net_input": {**net, "src_lengths": net["src_lengths"] - 1}}
        return super()._generate(sample, *args, **kwargs)

    def finalize_hypos(self, step, bbsz_idx, eos_scores, tokens, scores, *args):
        max_len = args[-1]
        at_limit = self.free_eos_at_limit and step >= max_len and step > 0
        if at_limit:
            # the EOS fairseq forced here adds nothing: the score up to the previous step (the
            # per-position score of this EOS becomes 0), and the length counts no EOS
            eos_scores = scores.index_select(0, bbsz_idx)[:, step - 1]
        length = step if at_limit else step + 1
        if self.lenpen_formula == "gnmt" or at_limit:
            # fairseq divides by (step + 1) ** len_penalty: choose the exponent that makes it the
            # divisor of L = length tokens, ((5 + L) / 6) ** alpha (gnmt) or L ** alpha
            divisor = self.length_divisor(length)
            self.len_penalty = 0.0 if step == 0 else math.log(divisor) / math.log(step + 1)
        else:
            self.len_penalty = self.alpha
        return super().finalize_hypos(step, bbsz_idx, eos_scores, tokens, scores, *args)
