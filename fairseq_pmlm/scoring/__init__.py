from . import rouge  # noqa: F401
