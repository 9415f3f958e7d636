"""fairseq criterion ``pmlm``: L = L_AE + L_PAR (paper eq.), each a mean over masked tokens.

AE predicts the originals at the masked context positions, PAR at the [P] tokens. Both
have one prediction per masked token, so with ``sample_size`` = masked tokens,
loss / sample_size = mean AE loss + mean PAR loss. Losses are computed in fp32.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass

from .. import objectives
from ..modules.attention_rule import CONTEXT, PSEUDO
from ..modules.transformer import ReadCells
from ..objectives import LOSS_PARTS

# the token kind each loss part predicts at
PART_KINDS = dict(zip(LOSS_PARTS, (CONTEXT, PSEUDO), strict=True))


@dataclass
class PMLMCriterionConfig(FairseqDataclass):
    pass


@register_criterion("pmlm", dataclass=PMLMCriterionConfig)
class PMLMCriterion(FairseqCriterion):
    def forward(self, model, sample, reduce=True):
        # one device sync a forward, as fairseq's masked_lm: the count of loss cells (and the most in a
        # row, for the last layer, which computes those alone). Every selection after it reads their
        # index, and the sums and sample_size stay on the device
        read = ReadCells.of(sample["target"].ne(self.padding_idx))
        logits, _ = model(**sample["net_input"], masked_tokens=read)
        target = sample["target"].flatten().index_select(0, read.cells)
        kinds = sample["net_input"]["kinds"].flatten().index_select(0, read.cells)
        # fp32 log-probabilities straight from half-precision logits, as fairseq's cross_entropy: no fp32
        # copy of the [N, V] logits forward, nor a cast of their gradient back (the same numbers)
        nll = F.nll_loss(F.log_softmax(logits, -1, dtype=torch.float32), target, reduction="none")
        correct = logits.argmax(-1).eq(target)
        out = {"ntokens": sample["ntokens"], "nsentences": sample["nsentences"]}
        for name, kind in PART_KINDS.items():
            sel = kinds.eq(kind)
            out[f"{name}_loss"] = nll.masked_fill(~sel, 0.0).sum().detach()
            out[f"{name}_correct"] = (correct & sel).sum()
            out[f"{name}_count"] = sel.sum()
        loss = nll.sum()
        # masked tokens: one AE and/or one PAR prediction each
        sample_size = torch.maximum(out["ae_count"], out["par_count"])
        out.update(loss=loss.detach(), sample_size=sample_size)
        return loss, sample_size, out

    def unlogged_metric(self, metric):
        """One line if ``metric`` (--best-checkpoint-metric) names a loss part this run's objective
        does not train, so validation never logs it (fairseq's KeyError after the first validation)."""
        parts = objectives.objective(str(self.task.cfg.objective)).loss_parts
        part, _, kind = metric.partition("_")
        if part in LOSS_PARTS and kind in ("loss", "acc") and part not in parts:
            logged = ", ".join(["loss"] + [f"{p}_{k}" for p in parts for k in ("loss", "acc")])
            return (f"--best-checkpoint-metric {metric}: --objective {self.task.cfg.objective} trains no {part} "
                    f"part, so validation never logs it (it logs {logged})")
        return None

    @staticmethod
    def reduce_metrics(logging_outputs):
        def total(key):
            return sum(float(log.get(key, 0)) for log in logging_outputs)

        sample_size = total("sample_size")
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1) / math.log(2), sample_size, round=3)
        for name in LOSS_PARTS:
            count = total(f"{name}_count")
            if count == 0:
                continue
            metrics.log_scalar(f"{name}_loss", total(f"{name}_loss") / count / math.log(2), count, round=3)
            metrics.log_scalar_sum(f"_{name}_correct", total(f"{name}_correct"))
            metrics.log_scalar_sum(f"_{name}_count", count)
            metrics.log_derived(
                f"{name}_acc",
                lambda m, n=name: round(100 * m[f"_{n}_correct"].sum / max(m[f"_{n}_count"].sum, 1), 2),
            )
        metrics.log_scalar_sum("masked", sample_size, round=0)

    @staticmethod
    def logging_outputs_can_be_summed():
        return True
