"""SIGTERM handled as Ctrl-C by the commands that build outputs in a temporary directory
(text_to_databin, convert_checkpoint): Python's default SIGTERM kills the process before any
``finally`` runs, which would leave the hidden temporary directory behind. Training handles
SIGTERM differently (``preemption.py``: save at the next update, then stop). The first SIGTERM or
Ctrl-C interrupts; later ones are ignored while the command cleans up."""
import signal


def _interrupt(signum, frame):
    # once: the next SIGTERM or Ctrl-C (a scheduler may signal again) must not cut short the
    # cleanup this one starts (stopping the workers, removing the temporary directory)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def sigterm_as_interrupt():
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
