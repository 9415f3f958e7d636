from . import pmlm, pmlm_seq2seq  # noqa: F401
