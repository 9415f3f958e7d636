"""The flex attention path, opt-in (``attention_impl="flex"``): one ``flex_attention`` call per
layer (docs/DESIGN.md §2).

The SDPA path runs two fused calls per layer (context block, appended block) over a
materialised [B, H, Tq, Tk] additive bias that needs a gradient. Here the whole sequence,
context and appended tokens, is one call:
  - PMLM's permission rule is a ``BlockMask`` whose ``mask_mod`` is the rule itself
    (``attention_rule.pair_allowed``), built once per batch and shared by all layers; blocks
    the rule forbids entirely (context queries x appended keys) are skipped, as the SDPA
    plan's two blocks skip them;
  - the relative-position bias is a ``score_mod`` that reads a [H, 2P-1] table of the bias
    per distance, built outside the kernel from the model's weights.
Measured on an H200 (torch 2.11) it is slower than SDPA: the backward sums the table's gradient
with atomics per (query, key) pair, and even the forward, block mask included, is 3.3x SDPA's.
So the default ("auto") is SDPA; this path stays for the torch versions and machines where it pays.

Flex has no attention dropout and no backward on the CPU: the caller takes this path only
where neither is needed (``UniLMv2Transformer.uses_flex``). A machine where it fails to
compile (Triton missing, shared memory too small, ...) or, on the CPU, gives wrong results
(``FlexPlan.check_cpu``) falls back to SDPA with one log line, for the rest of the process; it never
stops a run.
"""
import logging

import torch
import torch.nn.functional as F

from .attention_rule import PAD, TokenDescription, pair_allowed

logger = logging.getLogger(__name__)

# block-mask granularity; lengths are padded to it so the kernel sees whole blocks and a run
# compiles for few distinct lengths
ALIGN = 128
# fit Hopper's 227 KB of shared memory (the default configs ask for ~272 KB at head dim 64);
# the backward asserts BLOCK_N1 % BLOCK_M1 == 0, and every block divides ALIGN
CUDA_KERNEL_OPTIONS = {
    "fwd_BLOCK_M": 64, "fwd_BLOCK_N": 64, "fwd_num_stages": 2,
    "bwd_BLOCK_M1": 32, "bwd_BLOCK_N1": 64, "bwd_BLOCK_M2": 64, "bwd_BLOCK_N2": 32, "bwd_num_stages": 1,
}

# the compiled function, the failure that turned flex off (None: none yet), the input shapes whose
# backward has compiled, the calls flex served (benchmarks report which path ran), the CPU kernels
# (input shape, dtype, with a score_mod or not) whose results have been checked
_state = {"compiled": None, "failure": None, "backward_checked": set(), "calls": 0, "cpu_checked": set()}


def calls():
    """How many attention calls flex has served in this process."""
    return _state["calls"]


def failure():
    """The error that turned flex off in this process, or None."""
    return _state["failure"]


def available():
    """Whether this torch has flex attention and it has not failed in this process."""
    if _state["failure"] is not None:
        return False
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def _compiled():
    if _state["compiled"] is None:
        from torch.nn.attention.flex_attention import flex_attention

        # eager flex materialises the scores (no faster than SDPA): it is only worth compiling.
        # Static shapes: lengths come padded to ALIGN, so few recompiles, and inductor's CPU code for
        # a dynamic-shape recompile does not compile in torch 2.13 (cur_kvSplitSize9 undeclared)
        _state["compiled"] = torch.compile(flex_attention, dynamic=False)
    return _state["compiled"]


class WrongResults(RuntimeError):
    """The compiled kernel ran but its output is not attention's (see ``FlexPlan.check_cpu``)."""


def padded(length):
    return -(-length // ALIGN) * ALIGN


def mask_mod_of(kinds, steps):
    """``mask_mod`` of the PMLM rule for [B, T] kinds/steps (T padded: extra columns PAD)."""

    def mask_mod(b, h, q_idx, kv_idx):
        return pair_allowed(kinds[b, q_idx], steps[b, q_idx], kinds[b, kv_idx], steps[b, kv_idx])

    return mask_mod


def score_mod_of(table, positions):
    """``score_mod`` adding the relative bias: ``table`` [H, 2P-1] holds the bias of distances
    1-P .. P-1 (key position minus query position), ``positions`` [B, T] the position ids."""
    offset = (table.size(1) - 1) // 2

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + table[h, positions[b, kv_idx] - positions[b, q_idx] + offset]

    return score_mod


def _pad_columns(t, length, value):
    return t if t.size(1) == length else F.pad(t, (0, length - t.size(1)), value=value)


class FlexPlan:
    """One batch's flex attention: the block mask and score_mod every layer reuses, and the
    SDPA plan to fall back on (built only if the fallback happens)."""

    def __init__(self, desc: TokenDescription, table, sdpa_plan):
        from torch.nn.attention.flex_attention import create_block_mask

        B, T = desc.kinds.shape
        self.length, self.padded = T, padded(T)
        kinds = _pad_columns(desc.kinds, self.padded, PAD)
        steps = _pad_columns(desc.steps, self.padded, 0)
        self.mask_mod = mask_mod_of(kinds, steps)
        self.block_mask = create_block_mask(self.mask_mod, B, None, self.padded, self.padded,
                                            device=desc.kinds.device, BLOCK_SIZE=ALIGN)
        self.table, self.positions = table, _pad_columns(desc.positions, self.padded, 0)
        self.score_mod = None if table is None else score_mod_of(table, self.positions)
        self.kernel_options = CUDA_KERNEL_OPTIONS if desc.kinds.is_cuda else None
        self._sdpa_plan, self._make_sdpa_plan = None, sdpa_plan

    def sdpa_plan(self):
        if self._sdpa_plan is None:
            self._sdpa_plan = self._make_sdpa_plan()
        return self._sdpa_plan

    def attend(self, q, k, v):
        """[B, H, T, D] -> [B, H, T, D], or None once flex has failed (then use ``sdpa_plan``)."""
        if _state["failure"] is not None:
            return None
        pad = self.padded - self.length
        if pad:
            q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
        try:
            kernel = (q.shape, q.dtype, self.table is not None)
            if not q.is_cuda and kernel not in _state["cpu_checked"]:
                with torch.no_grad():
                    self.check_cpu(q)
                _state["cpu_checked"].add(kernel)
            y = _compiled()(q, k, v, score_mod=self.score_mod, block_mask=self.block_mask,
                            kernel_options=self.kernel_options)
            if y.requires_grad and (q.shape, q.dtype) not in _state["backward_checked"]:
                self._check_backward(q, k, v)
        except torch.OutOfMemoryError:
            raise  # the SDPA path needs more memory, not less
        except Exception as e:  # noqa: BLE001 - any compile/launch failure: fall back, never stop the run
            _state["failure"] = e
            logger.warning("flex attention failed on this machine, using SDPA for the rest of the run: %s: %s",
                           type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            return None
        _state["calls"] += 1
        return y[:, :, : self.length] if pad else y

    def check_cpu(self, q):
        """torch 2.13's compiled CPU flex can give wrong results: any score_mod or block mask off by 1-3,
        while plain attention is right, where its compile cache was written under another
        ATEN_CPU_CAPABILITY (native, then the AVX2 emulation, or the reverse: the cache key leaves that
        setting out; from a cold cache both are right). Before the first call of each input shape: the
        kernel this call runs (same shape, dtype, block mask and score_mod, so nothing more to compile)
        on random inputs and a random bias table, its first sequence against SDPA's attention with the
        same rule and bias spelled out; raises ``WrongResults`` where they differ (the caller falls back
        as for any failure)."""
        g = torch.Generator().manual_seed(0)
        H, T = q.shape[1:3]
        pq, pk, pv = (torch.randn(q.shape, generator=g).to(q.dtype) for _ in range(3))
        table = None if self.table is None else torch.randn(self.table.shape, generator=g).to(self.table)
        score_mod = None if table is None else score_mod_of(table, self.positions)
        got = _compiled()(pq, pk, pv, score_mod=score_mod, block_mask=self.block_mask)[0].float()
        b, h, qi, ki = torch.tensor(0), torch.arange(H)[:, None, None], torch.arange(T)[None, :, None], torch.arange(T)
        allowed = self.mask_mod(b, h, qi, ki).expand(H, T, T)
        bias = torch.zeros(H, T, T) if score_mod is None else score_mod(torch.zeros(H, T, T), b, h, qi, ki).float()
        want = F.scaled_dot_product_attention(pq[0].float(), pk[0].float(), pv[0].float(),
                                              attn_mask=bias.masked_fill(~allowed, float("-inf")))
        seen = allowed.any(-1)  # rows of padding see no key: SDPA gives NaN there, flex 0
        error = float((got - want)[seen].abs().max())
        # 16-bit inputs: the kernel's output is rounded to them (errors of the wrong kernel: ~1)
        if not error < (1e-4 if q.dtype in (torch.float32, torch.float64) else 5e-2):
            raise WrongResults(f"compiled flex_attention gives wrong results on this CPU (max error {error:.3g} "
                               "against SDPA on a check of this call's kernel; torch's compiled CPU code, e.g. a "
                               "compile cache written under another ATEN_CPU_CAPABILITY)")

    def _check_backward(self, q, k, v):
        """The backward kernel compiles at the first backward of each input shape, outside any try
        here: compile it now, on copies of this call's inputs, so that its failure too falls back
        instead of stopping the run (once per shape: a run has few, its lengths padded to ALIGN).
        ``autograd.grad`` of the copies only: no parameter's .grad is touched."""
        probe = [t.detach().requires_grad_() for t in (q, k, v)]
        y = _compiled()(*probe, score_mod=self.score_mod, block_mask=self.block_mask,
                        kernel_options=self.kernel_options)
        torch.autograd.grad(y.sum(), probe, allow_unused=True)
        _state["backward_checked"].add((q.shape, q.dtype))
