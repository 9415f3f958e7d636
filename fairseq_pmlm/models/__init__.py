from . import unilmv2  # noqa: F401
