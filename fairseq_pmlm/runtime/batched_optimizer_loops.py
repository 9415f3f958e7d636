"""fairseq's per-tensor loops around the optimizer step, batched: a few kernels, not one per tensor.

A base-size model has ~200 parameter tensors, and on a GPU each small kernel is shorter than its
launch, so these loops leave the device waiting for the host. Measured on an H100 (docs/BENCHMARKS.md):
- ``--fp16`` (``FP16Optimizer``, flat fp32 master copy) copies each gradient into the flat buffer and
  each stepped value back, ~400 copies an update: 6.5 ms of device idle in a 98 ms PMLM update.
  Here the gradients are joined by one ``torch.cat`` and copied (cast) once; the parameters are
  cast once and copied by one ``_foreach_copy_``. Without a flat buffer (``--fp16-no-flatten-grads``,
  TPU), fairseq's own loops run.
- fp32 parameters (``--bf16-autocast``, ``--amp``, fp32): without apex's ``amp_C`` fairseq's
  ``clip_grad_norm_`` takes one norm kernel per gradient (4.8 ms of idle in a bf16 autocast update);
  here ``torch._foreach_norm`` (apex's kernel keeps precedence where installed).
The same values either way: a copy is a copy, and each norm is the same fp32 norm of one gradient.
"""
from collections import defaultdict

import torch
from fairseq import utils
from fairseq.optim.fp16_optimizer import _FP16OptimizerMixin

FAIRSEQ_GRADS_TO_FP32 = _FP16OptimizerMixin._sync_fp16_grads_to_fp32
FAIRSEQ_PARAMS_TO_FP16 = _FP16OptimizerMixin._sync_fp32_params_to_fp16


def _by_device(params):
    out = defaultdict(list)
    for p in params:
        out[p.device.index].append(p)
    return out


def sync_fp16_grads_to_fp32(self):
    """fairseq's order and offsets: the parameters that need a gradient, packed in turn (a missing
    gradient is zeros)."""
    if not (self._needs_sync and self.has_flat_params):
        return FAIRSEQ_GRADS_TO_FP32(self)
    by_device = _by_device(p for p in self.fp16_params if p.requires_grad)
    for device, flat in self.fp32_params.items():
        grads = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in by_device[device]]
        if grads:
            joined = torch.cat(grads)
            flat.grad.data[: joined.numel()].copy_(joined)
    self._needs_sync = False


def sync_fp32_params_to_fp16(self):
    """fairseq's order and offsets: every parameter, packed in turn."""
    if not self.has_flat_params:
        return FAIRSEQ_PARAMS_TO_FP16(self)
    by_device = _by_device(self.fp16_params)
    for device, flat in self.fp32_params.items():
        params = by_device[device]
        if not params:
            continue
        if any(p.dtype != params[0].dtype for p in params):  # one cast serves one dtype only
            return FAIRSEQ_PARAMS_TO_FP16(self)
        sizes = [p.numel() for p in params]
        cast = flat.data[: sum(sizes)].to(params[0].dtype)
        torch._foreach_copy_([p.data for p in params], [c.view_as(p) for c, p in zip(cast.split(sizes), params)])


def total_norm(grads, chunk_size=None):
    """The L2 norm of all ``grads`` together, in fp32: ``_foreach_norm`` per device and dtype (one
    multi-tensor kernel each), then the norm of those norms, as fairseq's fallback loop computes it."""
    groups = defaultdict(list)
    for g in grads:
        groups[(g.device, g.dtype)].append(g)
    device = grads[0].device
    # fp32 norms of half-precision gradients too: with --memory-efficient-fp16 they carry the loss
    # scale, and an fp16 norm would overflow where fairseq's fp32 one does not
    norms = [n.to(device) for gs in groups.values() for n in torch._foreach_norm(gs, 2.0, dtype=torch.float32)]
    return torch.linalg.vector_norm(torch.stack(norms), 2.0, dtype=torch.float32)


_FP16OptimizerMixin._sync_fp16_grads_to_fp32 = sync_fp16_grads_to_fp32
_FP16OptimizerMixin._sync_fp32_params_to_fp16 = sync_fp32_params_to_fp16
if not utils.multi_tensor_l2norm_available:  # apex's amp_C, where present, stays fairseq's choice
    utils.multi_tensor_total_norm, utils.multi_tensor_l2norm_available = total_norm, True
