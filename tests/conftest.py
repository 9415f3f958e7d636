"""Fixtures for the unit tests; the builders themselves live in helpers.py (``make_dictionary``
is also importable from here, as test_seq2seq.py does)."""
import os
import signal

# Triton's kernels run on the CPU only in its interpreter (test_toeplitz_attention.py), and only if
# it is on when Triton is first imported (its own library functions are decorated then): before
# anything here imports torch or Triton. Not on a machine with an NVIDIA GPU, whose Triton compiles
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers import make_dictionary  # noqa: E402

# A suite started as a background job of a shell without job control (`bash scripts/test.sh &`)
# inherits SIGINT ignored, and so would every command the tests start, which then cannot be
# interrupted: the Ctrl-C tests need it delivered. A handler (unlike an ignore) is not inherited.
signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def dictionary():
    return make_dictionary()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def one_thread():
    """The unit tests' tensors are tiny: one intra-op thread is faster on a small, busy
    machine (and the result does not depend on it). Restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_configure(config):
    """The notices every plugin command leaves out (fairseq_pmlm/runtime/quiet.py), left out of the
    suite's warnings summary too: pytest resets the filters that importing the plugin set."""
    from fairseq_pmlm.runtime import quiet

    quiet.ignore_notices()
