"""``--bf16-autocast``: bfloat16 training through the plugin's tasks.

fairseq's own ``--bf16`` turns on TPU mode (and crashes on a GPU). This option instead runs
the criterion's forward under ``torch.autocast(bfloat16)`` on the model's device: matmuls in
bf16, weights, gradients and Adam's state stay fp32 (the master weights), and no loss
scaling is needed (bf16 has fp32's exponent range). The backward runs outside autocast, as
torch recommends; checkpoints hold plain fp32 weights. The weights autocast would cast at their
use are cast beforehand, all in one batched copy (``weights_cast_once``).
"""
import contextlib
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import AMPOptimizer, FP16Optimizer, MemoryEfficientFP16Optimizer
from omegaconf import II
from omegaconf.errors import InterpolationResolutionError

from ..errors import BadInput
from ..runtime.tpu_mode import tpu_problem


@dataclass
class AutocastConfig(FairseqDataclass):
    bf16_autocast: bool = field(
        default=False,
        metadata={"help": "run forward passes under torch.autocast(bfloat16) with fp32 weights and no "
                          "loss scaling (use instead of --bf16, which means TPU, and of --fp16/--amp)"},
    )
    tpu: bool = II("common.tpu")  # fairseq sets it for --bf16 and --memory-efficient-bf16


class _Autocast:
    """``criterion(model, sample)`` under bf16 autocast. Entered inside fairseq's train_step,
    so its ``cuda.amp.autocast(enabled=False)`` (no --amp) cannot switch ours off."""

    def __init__(self, criterion):
        self.criterion = criterion

    def __call__(self, model, sample):
        with bf16_autocast(model), weights_cast_once(model, torch.bfloat16):
            return self.criterion(model, sample)


def bf16_autocast(model):
    device = next(model.parameters()).device.type
    return torch.autocast(device_type=device, dtype=torch.bfloat16)


@contextlib.contextmanager
def weights_cast_once(model, dtype):
    """Runs the block with the weights that autocast casts once a forward (``model.autocast_weights()``:
    (module, name) pairs) already cast to ``dtype``, by one batched copy, their gradients widened back
    by another (``_CastOnce``). Autocast casts each at its first use: for a base-size model ~150
    copies forward and ~150 back an update, each shorter than its launch on a GPU. The same numbers
    either way: each weight gets the same rounding to ``dtype``, each gradient the same widening
    (which weights qualify: ``UniLMv2Transformer.autocast_weights``). Frozen weights (no gradient)
    are left to autocast: cast here they would get gradients computed for nothing. A model without
    that method (or returning None), or with weights other than fp32 (autocast leaves float64
    alone), runs as it is."""
    find = getattr(model, "autocast_weights", None)
    slots = [(m, n) for m, n in (find() if find is not None else None) or [] if m._parameters[n].requires_grad]
    weights = [m._parameters[n] for m, n in slots]
    if not weights or any(w.dtype != torch.float32 for w in weights):
        yield
        return
    # in the modules' parameter dicts, for the block: a module reads its weight from there
    for (m, n), cast in zip(slots, _CastOnce.apply(dtype, *weights)):
        m._parameters[n] = cast
    try:
        yield
    finally:
        for (m, n), w in zip(slots, weights):
            m._parameters[n] = w


class _CastOnce(torch.autograd.Function):
    """``tensors`` cast to ``dtype``, the gradients cast back to fp32: one ``_foreach_copy_`` each way
    (on CUDA a few launches for all, not one a tensor)."""

    @staticmethod
    def forward(ctx, dtype, *tensors):
        ctx.set_materialize_grads(False)  # a weight the forward did not use gets no gradient, as before
        return tuple(_cast(tensors, dtype))

    @staticmethod
    def backward(ctx, *grads):
        widened = iter(_cast([g for g in grads if g is not None], torch.float32))
        return (None, *(None if g is None else next(widened) for g in grads))


def _cast(tensors, dtype):
    out = [torch.empty_like(t, dtype=dtype) for t in tensors]
    if out:
        torch._foreach_copy_(out, list(tensors))
    return out


class BF16AutocastMixin:
    """Put first among a task's bases; its config must derive from ``AutocastConfig``."""

    def __init__(self, cfg, *args, **kwargs):
        try:  # fairseq-generate ignored --bf16: the line fairseq-train's Trainer gives (runtime/tpu_mode.py)
            problem = tpu_problem(getattr(cfg, "tpu", False))  # a bare dataclass holds "${common.tpu}"
        except InterpolationResolutionError:  # a task config made outside fairseq's whole config
            problem = None
        if problem:
            raise BadInput(problem)
        super().__init__(cfg, *args, **kwargs)

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        if self.cfg.bf16_autocast:
            if isinstance(optimizer, (AMPOptimizer, FP16Optimizer, MemoryEfficientFP16Optimizer)):
                raise BadInput("--bf16-autocast keeps fp32 weights: drop --fp16/--bf16/--amp/"
                               "--memory-efficient-fp16/--memory-efficient-bf16")
            criterion = _Autocast(criterion)
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)

    def valid_step(self, sample, model, criterion):
        return super().valid_step(sample, model, _Autocast(criterion) if self.cfg.bf16_autocast else criterion)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        if not self.cfg.bf16_autocast:
            return super().inference_step(generator, models, sample, prefix_tokens, constraints)
        with bf16_autocast(models[0]):
            return super().inference_step(generator, models, sample, prefix_tokens, constraints)
