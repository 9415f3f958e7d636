"""SIGTERM handled as Ctrl-C by the commands that build outputs in a temporary directory
(text_to_databin, convert_checkpoint): Python's default SIGTERM kills the process before any
``finally`` runs, which would leave the hidden temporary directory behind. Training handles
SIGTERM differently (``preemption.py``: save at the next update, then stop)."""
import signal


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def sigterm_as_interrupt():
    signal.signal(signal.SIGTERM, _interrupt)
