"""SIGTERM handled as Ctrl-C by the commands that build outputs in a temporary directory
(text_to_databin, convert_checkpoint, get_data; the directory rule is ``output_dir``): Python's
default SIGTERM kills the process before any ``finally`` runs, which would leave the hidden
temporary directory behind. Training handles
SIGTERM differently (``preemption.py``: save at the next update, then stop). The first SIGTERM or
Ctrl-C interrupts; later ones are ignored while the command cleans up."""
import signal
import sys

from .. import disk_full
from ..errors import OneLineError, report_error
from . import output_dir


def _interrupt(signum, frame):
    # once: the next SIGTERM or Ctrl-C (a scheduler may signal again) must not cut short the
    # cleanup this one starts (stopping the workers, removing the temporary directory)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def sigterm_as_interrupt():
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)


def one_line_exit(prog, run, errors=(), out=None):
    """The exit status of such a command: ``run()`` under ``sigterm_as_interrupt``; 0, or 2 with
    ``PROG: error: MESSAGE`` for one of ``errors``, a ``OneLineError`` or an ``OSError`` (naming its
    file as the user will find it, else ``out``), or 130 on Ctrl-C or SIGTERM. On every way out the
    output directories still open are closed (``output_dir``: their staging directory removed)."""
    errors = (OneLineError, *(errors if isinstance(errors, tuple) else (errors,)))
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    sigterm_as_interrupt()
    try:
        run()
    except errors as e:
        return report_error(prog, e)
    except KeyboardInterrupt:
        done = output_dir.written()
        print(f"{prog}: interrupted: " + (f"{done[-1]} was written whole before" if done else "nothing written"),
              file=sys.stderr)
        return 130
    except OSError as e:
        full = e.errno in disk_full.NO_ROOM
        path = output_dir.shown(disk_full.written(e, e.__traceback__) if full else e.filename) or out
        return report_error(prog, disk_full.message(path, e) if full else f"{path}: {e.strerror or e}")
    finally:
        output_dir.close_all()
        # the caller's handlers again (a test or a library calls this in its own process, and an
        # ignored signal would be inherited by every process it starts later)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
