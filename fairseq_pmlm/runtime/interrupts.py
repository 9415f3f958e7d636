"""SIGTERM handled as Ctrl-C by the commands that build outputs in a temporary directory
(text_to_databin, convert_checkpoint, get_data): Python's default SIGTERM kills the process before any
``finally`` runs, which would leave the hidden temporary directory behind. Training handles
SIGTERM differently (``preemption.py``: save at the next update, then stop). The first SIGTERM or
Ctrl-C interrupts; later ones are ignored while the command cleans up."""
import signal
import sys


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
    ``PROG: error: MESSAGE`` for one of ``errors`` or an ``OSError`` (naming its file, else
    ``out``), or 130 with "interrupted: nothing written" on Ctrl-C or SIGTERM (``run`` removes its
    temporary directory on the way out)."""
    sigterm_as_interrupt()
    try:
        run()
    except errors as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted: nothing written", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"{prog}: error: {e.filename or out}: {e.strerror}", file=sys.stderr)
        return 2
    return 0
