"""A process that stops consuming fairseq's prefetching iterator mid-epoch (as fairseq-train
does at --max-update) exits 0, while the prefetch thread is busy in torch ops."""
import os
import subprocess
import sys

SCRIPT = """
import sys, torch
if sys.argv[1] == "plugin":
    import fairseq_pmlm  # noqa: F401  (installs the exit guard)
from fairseq.data.iterators import BufferedIterator

class Batches:  # each 'collation' spends its time in GIL-releasing torch ops
    def __len__(self):
        return 1000
    def __iter__(self):
        a = torch.randn(400, 400)
        for _ in range(1000):
            for _ in range(20):
                a = torch.tanh(a @ a)
            yield a.sum()

it = BufferedIterator(2, Batches())
next(it)
print("stopping mid-epoch", flush=True)
"""


def test_stopping_mid_epoch_exits_cleanly_with_the_plugin_loaded():
    """Without the plugin's guard this script aborts with exit 134 ("terminate called without
    an active exception") every time on torch 2.13 / Python 3.11."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "plugin"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "stopping mid-epoch" in proc.stdout
