"""A write the disk has no room for (``ENOSPC``, or a quota's ``EDQUOT``) is one line naming the
file, ``PATH: cannot write it: No space left on device``, whatever wrote it: the checkpoint saves
(``checkpoint_files.write_atomically``), the output directories (``output_dir``), the commands'
exits (``interrupts.one_line_exit``) and, for a write Python reports without a file name
(``print`` to fairseq-generate's results file, or to standard output redirected to a file), the
exception hook (``checkpoint_files``), which names the file the failing code was writing."""
import contextlib
import errno
import os
import stat

from .errors import OneLineError

NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(OneLineError, OSError):
    """No room to write a file; the message names it."""


def message(path, e):
    return f"{path}: cannot write it: {os.strerror(e.errno)}"


def no_room(e):
    """The ``OSError`` of a full disk that is ``e`` or led to it (torch's writer raises its own
    "unexpected pos" while handling the file's ENOSPC), else None."""
    for _ in range(8):
        if e is None or isinstance(e, OSError) and e.errno in NO_ROOM:
            return e
        e = e.__cause__ or e.__context__
    return None


@contextlib.contextmanager
def named(path):
    """A write in the block that finds no room: ``DiskFull`` naming ``path``."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as e:
        full = no_room(e)
        if full is not None:
            raise DiskFull(message(path, full)) from None
        raise


def file_being_written(tb):
    """The name of the file opened for writing in the innermost frame of ``tb`` that holds one
    (``print(..., file=f)`` and ``f.write`` raise without naming it), else None."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            if _open_for_writing(value):
                return value.name
    return None


def _open_for_writing(value):
    """A file object (or one that acts as one) opened for writing, with a name (closed by now,
    maybe: a ``with`` block closes it on the way out)."""
    if isinstance(value, (str, bytes, int, float, type)):
        return False
    name, mode = getattr(value, "name", None), getattr(value, "mode", None)
    return isinstance(name, str) and isinstance(mode, str) and any(c in mode for c in "wax+")


def one_line(e, tb=None):
    """The one line for an exception that is a full disk, else None."""
    if isinstance(e, DiskFull):
        return str(e)
    full = no_room(e)
    path = written(full, tb) if full is not None else None
    return message(path, full) if path else None


def written(e, tb=None):
    """The file a full disk's ``OSError`` ``e`` failed to write: the destination of a copy (its
    second name), else its name, else the file the failing code was writing."""
    return e.filename2 or e.filename or file_being_written(tb) or _redirected_stdout()


def _redirected_stdout():
    """The file standard output is redirected to (``CMD > FILE``: ``print`` fails naming nothing)."""
    try:
        mode = os.fstat(1).st_mode
        return os.readlink("/proc/self/fd/1") if stat.S_ISREG(mode) or stat.S_ISCHR(mode) else None
    except OSError:
        return None
