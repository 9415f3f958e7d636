from . import pseudo_masked_lm  # noqa: F401
