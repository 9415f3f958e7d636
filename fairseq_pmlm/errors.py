"""Errors whose message is all the user needs: one line naming the file or flag to fix. Every such
type derives from ``OneLineError``; a program that stops on one prints ``PROG: error: MESSAGE``
and nothing else, with exit status 2 (``BAD_INPUT``, as argparse): through ``exit_with_error``,
``report_error`` or, when one reaches the top of a program (fairseq's commands), the exception
hook ``print_one_line_errors`` that importing the plugin installs. In Python they stay what they
were (``ValueError``, ``FileNotFoundError``), so callers catch them as before. Written without
fairseq (the ground floor): the data checks and the recipes' helpers use them too."""
import os
import sys

BAD_INPUT = 2  # the exit status of a command given what it cannot use, as argparse's


class OneLineError(Exception):
    """The message is one line naming what to fix."""


class BadInput(OneLineError, ValueError):
    """A file, flag or checkpoint that cannot be used as given."""


class InputNotFound(OneLineError, FileNotFoundError):
    """A file or directory that is not there."""


def report_error(prog, message):
    """``PROG: error: MESSAGE`` on stderr; returns the exit status of bad input."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return BAD_INPUT


def exit_with_error(prog, message):
    """Stop the program on bad input: its one line, exit status 2 (a SystemExit: no traceback)."""
    raise SystemExit(report_error(prog, message))


def one_line_of(value, traceback):
    """The line a ``OneLineError`` or a full disk (``disk_full``: named even where Python names no
    file) stops a program with; None for any other exception."""
    from .disk_full import one_line  # here: disk_full builds on this module

    return str(value) if isinstance(value, OneLineError) else one_line(value, traceback)


def print_one_line_errors(kind, value, traceback, _previous=sys.excepthook):
    """``sys.excepthook``: an exception with a line (``one_line_of``) reaching the top of a program is
    that line and exit status 2; any other as before."""
    line = one_line_of(value, traceback)
    if line is not None:
        exit_with_error(os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") else "python",
                        line)
    _previous(kind, value, traceback)


def install_one_line_errors():
    """Errors that reach the top of a program go through ``print_one_line_errors`` (the package's
    ``__init__`` and the scripts that import a module without it both call this)."""
    sys.excepthook = print_one_line_errors
