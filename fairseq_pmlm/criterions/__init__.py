from . import pmlm  # noqa: F401
