from . import pmlm_seq2seq, pseudo_masked_lm, squad  # noqa: F401
