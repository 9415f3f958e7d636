"""The shared context block's attention as one Triton kernel, opt-in (``attention_impl="triton"``;
docs/DESIGN.md §2).

In pre-training every row's context is the same block of contiguous positions (``check_prefix_len``'s
``ContextLayout``, shared and contiguous), so its relative-position bias depends only on key
index minus query index: bias[h, i, j] = table[h, j - i + N - 1], a Toeplitz matrix per head.
PyTorch's fused kernels take such a bias only materialised, and only the memory-efficient one
returns its gradient, by writing dS (a [B, H, N, N] tensor) and reducing it over the batch: on an
H100 that call took 1.97 ms (32 x 12 x 512 x 512, fp16, forward and backward) against flash's
0.72 ms without bias. Here a flash-style kernel reads the bias expanded from the [H, 2N-1] table
once a forward (``expand``: [H, N, N], shared by the batch and the layers) and sums each dS tile's diagonals into the
table's gradient (``toeplitz_kernels.py``): no [B, H, N, N] tensor is written in either direction.
Attention dropout is drawn in the kernel (Philox, from a seed per call), the same draw in the
forward and both backward passes. On an H200 its kernels take 0.75x SDPA's device time a call, but
a call costs the host ~1 ms, and the update is not reliably faster: "auto" does not take it
(docs/BENCHMARKS.md).

Only the context block goes here (in AE+PAR pre-training 12 of the 24 attention calls of an
update, in AE alone all of them); the appended block, with its per-row mask, stays on SDPA.
Where the kernel cannot run (no CUDA, no Triton, a head size it does not take, a dtype other
than fp16/bf16 on CUDA) the block is materialised as before. Before the first call of each
(device, dtype, head size, dropout) the kernel is compiled and checked against plain attention
on a small case, and before the first of each input layout its backward is compiled on copies
(``_compile_backward``); a failure there (or a wrong result) turns it off for the rest of the
process with one log line and the run goes on with SDPA. On the CPU it runs only under Triton's
interpreter (``TRITON_INTERPRET=1``): what the tests check its numerics with.
"""
import functools
import logging
import math
import os
from typing import NamedTuple

import torch

logger = logging.getLogger(__name__)

# tl.dot needs power-of-two tiles of at least 16; at 128 the backward passes spill registers (sm_90
# compile, every tile shape tried), so that size stays on SDPA
HEAD_DIMS = (16, 32, 64)

# the failure that turned the kernel off (None: none yet), the (device type, dtype, head size,
# dropout) cases that passed the probe, the input layouts whose kernels have compiled (``attend``),
# the calls served, whether "asked but not available" was logged
_state = {"failure": None, "checked": set(), "compiled": set(), "calls": 0, "told_unavailable": False}


def calls():
    """How many attention calls the kernel has served in this process."""
    return _state["calls"]


def failure():
    """The error that turned the kernel off in this process, or None."""
    return _state["failure"]


def interpreted():
    return os.environ.get("TRITON_INTERPRET") == "1"


def available(device):
    """Whether the kernel can serve attention on ``device`` in this process."""
    if _state["failure"] is not None or not (device.type == "cuda" or (device.type == "cpu" and interpreted())):
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        if not _state["told_unavailable"]:
            _state["told_unavailable"] = True
            logger.info("attention_impl triton: Triton is not installed, the context block runs on SDPA")
        return False
    return True


def takes(q, k, v):
    """Whether the kernel takes these [B, H, N, D] queries, keys and values (one dtype)."""
    if not q.dtype == k.dtype == v.dtype:
        return False
    # Triton's interpreter multiplies bf16 tiles wrongly (tl.dot of its raw bits): fp16 and fp32 there
    dtypes = (torch.float16, torch.bfloat16) if q.is_cuda else (torch.float16, torch.float32)
    return q.dtype in dtypes and q.size(-1) in HEAD_DIMS


class Launch(NamedTuple):
    """One kernel's tiles and launch options: BM queries by BN keys (multiples of 8; on a GPU the
    dK/dV pass's BM x BN at least 1024, its one-hot product's inner size BM x BN / 64 being tl.dot's
    16 at least), warps, stages."""

    BM: int
    BN: int
    warps: int = 8
    stages: int = 2


class Tiles(NamedTuple):
    fwd: Launch
    dkdv: Launch
    dq: Launch


# each pass keeps its accumulators ([BM or BN, D]) in registers and streams the other axis. Chosen
# on an H200 by scripts/bench_toeplitz.py (one pass's tiles changed at a time, fp16, dropout 0.1,
# 32 x 12 x 512 x 64): fwd 128x64 by 8 warps; dK/dV 64x64 and dQ 64x32 by 4 warps were each ~0.2 ms
# faster a call than 32x128 and 128x32 by 8, though the dK/dV pass with dropout spills (ptxas: an
# 80-byte stack frame at head size 64)
CUDA_TILES = Tiles(fwd=Launch(128, 64), dkdv=Launch(64, 64, 4), dq=Launch(64, 32, 4))
# the interpreter runs each program in Python, each tile op in numpy: few, large tiles are fastest
# (the kernel's tests choose small ones, to see several on each axis)
INTERPRETER_TILES = Tiles(fwd=Launch(64, 64), dkdv=Launch(64, 64), dq=Launch(64, 64))


def tiles(device):
    return CUDA_TILES if device.type == "cuda" else INTERPRETER_TILES


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, table, bias, dropout_p, seed, t: Tiles):
        B, H, N, D = q.shape
        o = q.new_empty(B, N, H, D).transpose(1, 2)  # the layout the output projection reads without a copy
        lse = torch.empty(B * H, N, dtype=torch.float32, device=q.device)
        bias = expand(table, N, q.dtype) if bias is None else bias
        launch_forward(q, k, v, bias, o, lse, seed, dropout_p, t)
        ctx.save_for_backward(q, k, v, bias, o, lse)
        ctx.args, ctx.table_dtype = (dropout_p, seed, t), table.dtype
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable  # no double backward: an error, not silent zeros
    def backward(ctx, do):
        q, k, v, bias, o, lse = ctx.saved_tensors
        dropout_p, seed, t = ctx.args
        B, H, N, D = q.shape
        do = do.to(q.dtype)
        if do.stride(-1) != 1:
            do = do.contiguous()
        dq, dk, dv = (torch.empty_like(o) for _ in range(3))  # o's layout: one set of strides (``so*``)
        delta = torch.empty_like(lse)  # rowsum(dO * O), written by the dQ pass for the dK/dV pass
        # one copy of the table's gradient per batch row (summed below): fewer atomics on one address
        dtable = torch.zeros(B, H, 2 * N - 1, dtype=torch.float32, device=q.device)
        launch_backward(q, k, v, bias, o, lse, do, delta, dq, dk, dv, dtable, seed, dropout_p, t)
        return dq, dk, dv, dtable.sum(0).to(ctx.table_dtype), None, None, None, None


def launch_forward(q, k, v, bias, o, lse, seed, dropout_p, t: Tiles):
    """The forward kernel's launch: ``o`` [B, H, N, D] and ``lse`` [B * H, N] written (what
    ``_Attention`` allocates; ``bench_toeplitz.py --host`` times the launches alone)."""
    from . import toeplitz_kernels as kern

    B, H, N, D = q.shape
    kern.toeplitz_attention_fwd[(cdiv(N, t.fwd.BM), B * H)](
        q, k, v, bias, o, lse, seed, 1.0 / math.sqrt(D), dropout_p, *q.stride()[:3], *k.stride()[:3],
        *v.stride()[:3], *o.stride()[:3], *bias.stride()[:2], H, N, D=D, BM=t.fwd.BM, BN=t.fwd.BN,
        DROPOUT=dropout_p > 0, num_warps=t.fwd.warps, num_stages=t.fwd.stages)


def launch_backward(q, k, v, bias, o, lse, do, delta, dq, dk, dv, dtable, seed, dropout_p, t: Tiles):
    """The backward kernels' launches, dQ (and delta) first, then dK/dV and the table's gradient
    ``dtable`` [B, H, 2N-1] (zeroed by the caller); dq, dk, dv laid out as ``o``."""
    from . import toeplitz_kernels as kern

    B, H, N, D = q.shape
    common = (seed, 1.0 / math.sqrt(D), dropout_p, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
              *do.stride()[:3], *o.stride()[:3], *bias.stride()[:2])
    kern.toeplitz_attention_bwd_dq[(cdiv(N, t.dq.BM), B * H)](
        q, k, v, bias, do, o, lse, delta, dq, *common, H, N,
        D=D, BM=t.dq.BM, BN=t.dq.BN, DROPOUT=dropout_p > 0, num_warps=t.dq.warps, num_stages=t.dq.stages)
    BM, BN = t.dkdv.BM, t.dkdv.BN
    coarse = max(16, 1 << (BM // 8 + BN // 8 - 2).bit_length())  # >= BM/8 + BN/8 - 1, a power of two, tl.dot's 16
    kern.toeplitz_attention_bwd_dkdv[(cdiv(N, BN), B * H)](
        q, k, v, bias, do, lse, delta, dk, dv, dtable, *common, *dtable.stride()[:2], H, N,
        D=D, BM=BM, BN=BN, WA=coarse, DROPOUT=dropout_p > 0, num_warps=t.dkdv.warps, num_stages=t.dkdv.stages)


def cdiv(a, b):
    return -(-a // b)


def toeplitz_attention(q, k, v, table, dropout_p=0.0, t: Tiles = None, bias=None):
    """softmax(q k^T / sqrt(D) + bias) v with bias[h, i, j] = table[h, j - i + N - 1], dropout on the
    probabilities; q, k, v [B, H, N, D] (unit stride on D), table [H, 2N-1]. Runs the kernel
    unchecked: ``attend`` is what the model calls. ``t``: the tiles, by default ``tiles(device)``;
    ``bias``: ``expand(table, N, q.dtype)`` if the caller has it (the layers share one)."""
    B, H, N, D = q.shape
    if k.shape != q.shape or v.shape != q.shape or tuple(table.shape) != (H, 2 * N - 1):
        raise ValueError(f"toeplitz_attention: q, k, v must be [B, H, N, D] alike and table [H, 2N-1]; got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}, table {tuple(table.shape)}")
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    seed = int(torch.randint(0, 2**31 - 1, (1,)).item()) if dropout_p > 0 else 0
    return _Attention.apply(q, k, v, table, bias, float(dropout_p), seed, t or tiles(q.device))


def dense_bias(table, N):
    """The [H, N, N] bias the kernel reads from ``table``: what the checks compare it with."""
    distance = torch.arange(N, device=table.device)[None, :] - torch.arange(N, device=table.device)[:, None]
    return table[:, distance + N - 1]


def expand(table, N, dtype):
    """``dense_bias`` as the kernel reads it: in ``dtype`` (the inputs', as SDPA's bias), each row
    padded to a multiple of 16 entries so that every row starts 32-byte aligned. Worked example:
    N = 500 gives a [H, 500, 512] tensor viewed as [H, 500, 500]."""
    return table.to(dtype)[:, _expand_index(N, table.device)][:, :, :N]


@functools.lru_cache(maxsize=16)
def _expand_index(N, device):
    """[N, N padded to 16] table columns of ``expand`` (past N: clamped, never read): made once per
    (N, device), not in every layer's call (its four small kernels are host time on a GPU)."""
    padded = cdiv(N, 16) * 16
    distance = torch.arange(padded, device=device)[None, :] - torch.arange(N, device=device)[:, None]
    return (distance + N - 1).clamp(max=2 * N - 2)


def _probe(device, dtype, D, dropout):
    """Compile the kernels for this case and check them on a small one (two tiles on each axis, the
    last partial) against plain attention, both in fp32 math outside any autocast; raises if they
    do not compile or are wrong."""
    with torch.autocast(device.type, enabled=False):
        _check(device, dtype, D, dropout)


def _check(device, dtype, D, dropout):
    g = torch.Generator(device=device).manual_seed(0)
    N, H = max(max(launch[:2]) for launch in tiles(device)) + 5, 2
    q, k, v = (torch.randn(1, H, N, D, generator=g, device=device).to(dtype) for _ in range(3))
    table = torch.randn(H, 2 * N - 1, generator=g, device=device)
    inputs = [t.detach().requires_grad_() for t in (q, k, v, table)]
    got = toeplitz_attention(*inputs)
    grads = torch.autograd.grad(got.float().square().sum(), inputs)
    if dropout:  # compiles the dropout variant too; its draw is checked by the tests
        torch.autograd.grad(toeplitz_attention(*inputs, 0.1).float().sum(), inputs)
    ref_inputs = [t.detach().float().requires_grad_() for t in (q, k, v, table)]
    want = _reference(*ref_inputs)
    want_grads = torch.autograd.grad(want.square().sum(), ref_inputs)
    want = want.detach()
    tolerance = 1e-4 if dtype == torch.float32 else 3e-2
    for name, a, b in [("output", got, want)] + list(zip(("dq", "dk", "dv", "dtable"), grads, want_grads)):
        error = float((a.detach().float() - b).abs().max() / b.abs().max().clamp(min=1e-6))
        if not error < tolerance:
            raise RuntimeError(f"the Toeplitz attention kernel gives wrong results here ({name}: relative "
                               f"error {error:.3g} against plain attention on a probe)")


def _reference(q, k, v, table):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + dense_bias(table, q.size(2))
    return scores.softmax(-1) @ v


def attend(q, k, v, table, dropout_p, expanded=None):
    """The context block's attention by the kernel, or None where it cannot serve it (then the
    caller materialises the bias): not available here, a shape or dtype it does not take, or
    it failed (logged once; off for the rest of the process). ``expanded``: a function of the
    dtype giving ``expand(table)`` shared by the layers (``ToeplitzBias.expanded``); by default
    each call expands the table itself."""
    if not available(q.device) or not takes(q, k, v):
        return None
    key = (q.device.type, q.dtype, q.size(-1), dropout_p > 0)
    try:
        if key not in _state["checked"]:
            with torch.enable_grad():
                _probe(q.device, q.dtype, q.size(-1), dropout_p > 0)
            _state["checked"].add(key)
        if (q.requires_grad or table.requires_grad) and layout(q, k, v, key) not in _state["compiled"]:
            _compile_backward(q, k, v, table, dropout_p, key)
        y = toeplitz_attention(q, k, v, table, dropout_p, bias=None if expanded is None else expanded(q.dtype))
    except torch.OutOfMemoryError:
        raise  # the SDPA path needs more memory, not less
    except Exception as e:  # noqa: BLE001 - any compile/launch failure: fall back, never stop the run
        _state["failure"] = e
        logger.warning("the Toeplitz attention kernel failed on this machine, using SDPA for the rest of the run: "
                       "%s: %s", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return None
    _state["calls"] += 1
    return y


def layout(q, k, v, key):
    """What Triton compiles a separate kernel version for besides the case: each integer argument
    that is 1 or a multiple of 16 (sizes, strides). Worked example: contexts of 512 and of 500
    tokens are two versions, 512 and 496 one."""
    sizes = (q.size(1), q.size(2), *q.stride()[:3], *k.stride()[:3], *v.stride()[:3])
    return key, tuple((x == 1, x % 16 == 0) for x in sizes)


def _compile_backward(q, k, v, table, dropout_p, key):
    """The backward kernels compile at the first backward of each input layout, where no fallback
    can catch a failure: compile them now, on copies of this call's inputs (``autograd.grad`` of the
    copies: no parameter's .grad is touched), so that their failure too falls back (once per layout:
    a run has few)."""
    with torch.enable_grad():
        copies = [t.detach().requires_grad_() for t in (q, k, v, table)]
        out = toeplitz_attention(*copies, dropout_p)
        # a gradient laid out as the output (the output projection's backward gives that layout)
        torch.autograd.grad(out, copies, torch.ones_like(out))
    _state["compiled"].add(layout(q, k, v, key))


class ToeplitzBias:
    """A plan block's bias as the kernel reads it (``table`` [H, 2N-1], and its ``expanded`` form),
    and the same bias materialised for SDPA (``dense()``); each built once, on first need, and
    shared by the layers."""

    def __init__(self, table, dense):
        self.table, self._dense, self._built, self._expanded = table, dense, None, None

    def expanded(self, dtype):
        """``expand(table)`` in ``dtype``, no autograd graph: the kernel returns the table's gradient."""
        if self._expanded is None or self._expanded.dtype != dtype:
            with torch.no_grad():
                self._expanded = expand(self.table, (self.table.size(1) + 1) // 2, dtype)
        return self._expanded

    def dense(self):
        if self._built is None:
            self._built = self._dense()
        return self._built
