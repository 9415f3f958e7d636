"""Ctrl-C while a Python command imports its code (fairseq's import, ~3 s): exit status 130 and
the line ``PROG: interrupted: nothing written``, not a KeyboardInterrupt traceback through the
import (nor ``ImportError: initialization failed``, exit 1, where it lands in an extension
module's initialisation). Nothing is written before the imports end; the command's own handling
of Ctrl-C (``runtime/interrupts.py``) takes over in ``main``.

    sys.path.insert(0, SCRIPTS_DIR)  # (a script in scripts/ has it already)
    from lib.import_guard import interruptible
    with interruptible("get_data.py"):
        from fairseq_pmlm.public_data.cnndm_xsum import main
"""
import contextlib
import os
import signal
import sys


@contextlib.contextmanager
def interruptible(prog):
    def stop(signum, frame):
        print(f"{prog}: interrupted: nothing written", file=sys.stderr, flush=True)
        os._exit(128 + signum)  # at once: nothing to clean up, and the import stops where it is

    before = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
