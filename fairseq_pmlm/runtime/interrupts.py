"""SIGTERM handled as Ctrl-C by the commands that build outputs in a temporary directory
(text_to_databin, convert_checkpoint, get_data; the directory rule is ``output_dir``): Python's
default SIGTERM kills the process before any ``finally`` runs, which would leave the hidden
temporary directory behind. Training handles
SIGTERM differently (``preemption.py``: save at the next update, then stop). The first SIGTERM or
Ctrl-C interrupts; later ones are ignored while the command cleans up, unless Python dropped the
first one (it landed in a finalizer): then it is sent again."""
import signal
import sys
import threading

from .. import disk_full
from ..errors import OneLineError, report_error
from . import output_dir

_raised = None  # the signal whose KeyboardInterrupt _interrupt raised last (_resending sends it again)


def _interrupt(signum, frame):
    # once: the next SIGTERM or Ctrl-C (a scheduler may signal again) must not cut short the
    # cleanup this one starts (stopping the workers, removing the temporary directory)
    global _raised
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _raised = signum
    raise KeyboardInterrupt


def sigterm_as_interrupt():
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)


def _send_again(signum):
    if signal.getsignal(signum) is _interrupt:  # (one_line_exit has not returned meanwhile)
        # a real signal to the main thread: it also cuts short a wait there (a sleep, a child's exit)
        signal.pthread_kill(threading.main_thread().ident, signum)


def _resending(previous):
    """An unraisable-exception hook. A signal handler runs wherever the main thread is, also inside a
    finalizer (a ``__del__``, a weakref callback: a DataLoader iterator's shutdown, say), and there
    Python prints the KeyboardInterrupt as "Exception ignored" and drops it: the command would run on
    with both signals ignored, deaf to any later Ctrl-C or SIGTERM. So the handlers go back on and
    the signal is sent again from a timer thread, to land once this finalizer and hook are done."""
    def hook(unraisable):
        global _raised
        if (issubclass(unraisable.exc_type, KeyboardInterrupt) and _raised is not None
                and threading.current_thread() is threading.main_thread()):
            signum, _raised = _raised, None
            sigterm_as_interrupt()
            resend = threading.Timer(0.01, _send_again, (signum,))
            resend.daemon = True
            resend.start()
        else:
            previous(unraisable)
    return hook


def one_line_exit(prog, run, errors=(), out=None):
    """The exit status of such a command: ``run()`` under ``sigterm_as_interrupt``; 0, or 2 with
    ``PROG: error: MESSAGE`` for one of ``errors``, a ``OneLineError`` or an ``OSError`` (naming its
    file as the user will find it, else ``out``), or 130 on Ctrl-C or SIGTERM. On every way out the
    output directories still open are closed (``output_dir``: their staging directory removed)."""
    errors = (OneLineError, *(errors if isinstance(errors, tuple) else (errors,)))
    global _raised
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    previous_hook, _raised = sys.unraisablehook, None
    sys.unraisablehook = _resending(previous_hook)
    sigterm_as_interrupt()
    try:
        run()
    except errors as e:
        return report_error(prog, e)
    except KeyboardInterrupt:
        _raised = None
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
        sys.unraisablehook = previous_hook
    return 0
