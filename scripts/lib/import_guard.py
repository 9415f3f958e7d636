"""How the scripts import the package.

``interruptible``: Ctrl-C while a Python command imports its code (fairseq's import, ~3 s): exit 130 and
the line ``PROG: interrupted: nothing written``, not a KeyboardInterrupt traceback through the
import (nor ``ImportError: initialization failed``, exit 1, where it lands in an extension
module's initialisation). Nothing is written before the imports end; the command's own handling
of Ctrl-C (``runtime/interrupts.py``) takes over in ``main``.

    sys.path.insert(0, SCRIPTS_DIR)  # (a script in scripts/ has it already)
    from lib.import_guard import interruptible
    with interruptible("convert_checkpoint.py"):
        from fairseq_pmlm.weights.convert import main

``without_registration``: the recipes' helpers (recipe_info, score, get_data, evaluate_squad)
read files and never run fairseq (prepare_glue does: it binarizes with fairseq-preprocess's code),
but ``import fairseq_pmlm.X`` first runs the package's ``__init__``, which imports fairseq and torch
to register the plugin (~2.5 s of a 0.1 s command, several times a recipe). With the package put in
``sys.modules`` unexecuted, only X and what X itself imports load (a module that needs fairseq still
imports it).
"""
import contextlib
import importlib.util
import os
import signal
import sys
import threading


@contextlib.contextmanager
def interruptible(prog=None):
    """``prog``: the name in the line, by default the command's (``sys.argv[0]``: a script imported
    by another, as bench_gpu.py imports bench_pretrain.py, names the one that was run)."""
    def stop(signum, frame):
        print(f"{prog or os.path.basename(sys.argv[0])}: interrupted: nothing written", file=sys.stderr, flush=True)
        os._exit(128 + signum)  # at once: nothing to clean up, and the import stops where it is

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    before = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def without_registration():
    """Make ``import fairseq_pmlm.X`` skip the package's ``__init__`` in this process (call it
    before the first such import): the plugin's registration and its changes to fairseq stay off;
    its hook for errors that reach the top (one line, exit 2) is installed as ``__init__`` does."""
    if "fairseq_pmlm" not in sys.modules:
        spec = importlib.util.find_spec("fairseq_pmlm")
        sys.modules["fairseq_pmlm"] = importlib.util.module_from_spec(spec)  # its __path__, nothing run
        from fairseq_pmlm.errors import install_one_line_errors

        install_one_line_errors()
