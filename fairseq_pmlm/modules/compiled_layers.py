"""``--compile-layers``: each Transformer layer's training forward through ``torch.compile``
(docs/DESIGN.md §2).

What it buys: inductor fuses the kernels between the matmuls and the attention call (bias add,
dropout, residual add, LayerNorm, GELU, forward and backward) and launches fewer of them, which
eager PyTorch runs one by one. The attention call itself stays PyTorch's fused SDPA kernel.
CUDA only: on the CPU it gained nothing (and torch 2.13's CPU compile cache, whose key leaves
ATEN_CPU_CAPABILITY out, gave NaNs or a heap corruption where written under another setting).
There the flag runs the layers eagerly and says so once.

One compiled function serves every layer: the layer is an argument, and torch.compile (which
inlines nn.Modules and passes their parameters as inputs) compiles the code once, not once per
layer. Shapes are static, one compile per sequence length and context length (the plan's block
bounds): the model pads lengths to a multiple of ``ALIGN`` with columns nobody sees (``pad``), so
pre-training's shapes come in few (most contexts are full; the appended part varies by a few
tokens: 674 and 676 -> 680). Past torch's recompile limit (8 shapes) a new shape runs eagerly
(torch logs it). Not dynamic shapes:
torch 2.11's inductor miscompiled the backward of the dynamic-length layer on an H200 (a view of
the wrong size: a crash in the backward, where no fallback can catch it).
Only training forwards over whole sequences with the SDPA plan take it: evaluation, decoding
(cached keys) and the flex path run eagerly.

A machine where it fails to compile (no C compiler or Triton, an unsupported op) runs the
layers eagerly with one log line, for the rest of the process; it never stops a run. For that
the backward compiles with the forward, inside the call that catches failures: torch (2.13)
otherwise compiles a static-shape backward at the first backward, where nothing here could catch
it.
"""
import contextlib
import logging

import torch
import torch.nn.functional as F

logger = logging.getLogger(__name__)

ALIGN = 8  # tokens: lengths are padded to a multiple of it (few static shapes)
BACKEND = "inductor"  # torch.compile's backend (the tests trace with "aot_eager": no code generated)
DEVICES = ("cuda",)  # where layers compile (the tests add "cpu")

# the compiled function, the failure that turned compiling off (None: none yet), whether the
# CPU's "not here" has been said
_state = {"compiled": None, "failure": None, "said": False}


def failure():
    """The error that turned compiled layers off in this process, or None."""
    return _state["failure"]


def wanted(device):
    """Whether layers on ``device`` compile: a CUDA device, until compiling has failed."""
    if device.type not in DEVICES:
        if not _state["said"]:
            _state["said"] = True
            logger.warning("--compile-layers: the layers compile on CUDA devices only; on %s they run eagerly",
                           device.type)
        return False
    return _state["failure"] is None


def pad(x, q):
    """``x`` [B, T, C] and its ``TokenDescription`` with PAD columns appended up to a multiple of
    ``ALIGN``: no query sees a PAD key, and PAD queries' outputs are cut off after the layers, so
    the real tokens' outputs and gradients are unchanged. Worked example: T = 674 -> 680."""
    q = q.padded(ALIGN)
    return F.pad(x, (0, 0, 0, q.kinds.size(1) - x.size(1))), q


def _reason(e):
    """One line: the error and, when it wraps another (torch's BackendCompilerFailed does), the innermost."""
    def line(err):
        text = str(err).strip()
        return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__

    inner = e
    while (getattr(inner, "inner_exception", None) or inner.__cause__) is not None:
        inner = getattr(inner, "inner_exception", None) or inner.__cause__
    return line(e) if inner is e else f"{type(e).__name__} ({line(inner)})"


def _call(layer, x, plan):
    return layer(x, plan)


def _backward_compiled_with_forward():
    """torch's switch that compiles the backward at the forward's compile (torch versions without it
    compile a static-shape backward ahead of time anyway)."""
    config = torch._functorch.config
    if hasattr(config, "force_non_lazy_backward_lowering"):
        return config.patch(force_non_lazy_backward_lowering=True)
    return contextlib.nullcontext()


def run(layer, x, plan):
    """``layer(x, plan)`` compiled; eagerly once compiling has failed in this process."""
    if _state["failure"] is None:
        if _state["compiled"] is None:
            _state["compiled"] = torch.compile(_call, dynamic=False, backend=BACKEND)
        try:
            with _backward_compiled_with_forward():
                return _state["compiled"](layer, x, plan)
        except torch.OutOfMemoryError:
            raise  # the eager layer needs more memory, not less
        except Exception as e:  # noqa: BLE001 - any compile failure: run eagerly, never stop the run
            _state["failure"] = e
            logger.warning("torch.compile of the layers failed on this machine, running them eagerly for the rest "
                           "of the run: %s", _reason(e))
    return layer(x, plan)
