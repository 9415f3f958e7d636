from . import pmlm, squad  # noqa: F401
