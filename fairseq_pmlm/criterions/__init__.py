from . import pmlm, pmlm_seq2seq, squad  # noqa: F401
