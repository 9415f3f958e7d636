"""``--bf16-autocast``: bfloat16 training through the plugin's tasks.

fairseq's own ``--bf16`` turns on TPU mode (and crashes on a GPU). This option instead runs
the criterion's forward under ``torch.autocast(bfloat16)`` on the model's device: matmuls in
bf16, weights, gradients and Adam's state stay fp32 (the master weights), and no loss
scaling is needed (bf16 has fp32's exponent range). The backward runs outside autocast, as
torch recommends; checkpoints hold plain fp32 weights.
"""
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import FairseqDataclass
from fairseq.optim import AMPOptimizer, FP16Optimizer, MemoryEfficientFP16Optimizer


@dataclass
class AutocastConfig(FairseqDataclass):
    bf16_autocast: bool = field(
        default=False,
        metadata={"help": "run forward passes under torch.autocast(bfloat16) with fp32 weights and no "
                          "loss scaling (use instead of --bf16, which means TPU, and of --fp16/--amp)"},
    )


class _Autocast:
    """``criterion(model, sample)`` under bf16 autocast. Entered inside fairseq's train_step,
    so its ``cuda.amp.autocast(enabled=False)`` (no --amp) cannot switch ours off."""

    def __init__(self, criterion):
        self.criterion = criterion

    def __call__(self, model, sample):
        with bf16_autocast(model):
            return self.criterion(model, sample)


def bf16_autocast(model):
    device = next(model.parameters()).device.type
    return torch.autocast(device_type=device, dtype=torch.bfloat16)


class BF16AutocastMixin:
    """Put first among a task's bases; its config must derive from ``AutocastConfig``."""

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        if self.cfg.bf16_autocast:
            if isinstance(optimizer, (AMPOptimizer, FP16Optimizer, MemoryEfficientFP16Optimizer)):
                raise ValueError("--bf16-autocast keeps fp32 weights: drop --fp16/--bf16/--amp/"
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
