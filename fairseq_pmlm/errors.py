"""Errors whose message is all the user needs: one line naming the file or flag to fix. A program
that stops on one prints ``PROG: error: MESSAGE`` and nothing else (the exception hook that
``runtime/checkpoint_files.py`` installs), not a traceback through fairseq. In Python they stay
what they were (``ValueError``, ``FileNotFoundError``), so callers catch them as before. Written
without fairseq (the ground floor): the data checks and the recipes' helpers use them too."""


class OneLineError(Exception):
    """The message is one line naming what to fix."""


class BadInput(OneLineError, ValueError):
    """A file, flag or checkpoint that cannot be used as given."""


class InputNotFound(OneLineError, FileNotFoundError):
    """A file or directory that is not there."""
