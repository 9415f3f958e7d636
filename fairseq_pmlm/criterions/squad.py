"""fairseq criterion ``pmlm_squad``: the mean of the start and end cross-entropies over the
positions an answer may take (the window's passage tokens and [SOS], the no-answer span).

Logs ``loss`` (nats a window), and on the windows ``start_acc``, ``end_acc`` and
``span_acc`` (both right): a quick signal; EM/F1 come from scripts/squad/predict_squad.py.
"""
from dataclasses import dataclass

import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.dataclass import FairseqDataclass
from fairseq.logging import metrics

from ..symbols import SPAN_HEAD


def span_logits(model, sample):
    """Start and end logits [B, T] (float), -inf where no answer may start or end."""
    start, end = model(**sample["net_input"], span_head_name=SPAN_HEAD)[0]
    allowed = sample["candidates"]
    return start.float().masked_fill(~allowed, float("-inf")), end.float().masked_fill(~allowed, float("-inf"))


@dataclass
class PMLMSquadCriterionConfig(FairseqDataclass):
    pass


@register_criterion("pmlm_squad", dataclass=PMLMSquadCriterionConfig)
class PMLMSquadCriterion(FairseqCriterion):
    LOGGED = ("loss", "start_acc", "end_acc", "span_acc")  # reduce_metrics' (fairseq's meters: checkpoint_files)

    def unlogged_metric(self, metric):
        """One line if --best-checkpoint-metric names what validation never logs (f1, exact: those
        come after training), before training: fairseq's KeyError came after the first validation."""
        if metric in self.LOGGED:
            return None
        return (f"--best-checkpoint-metric {metric}: pmlm_squad's validation logs {', '.join(self.LOGGED)} "
                "(EM and F1 come from scripts/squad/predict_squad.py after training)")

    def forward(self, model, sample, reduce=True):
        start, end = span_logits(model, sample)
        s_gold, e_gold = sample["start_positions"], sample["end_positions"]
        loss = (F.cross_entropy(start, s_gold, reduction="sum") + F.cross_entropy(end, e_gold, reduction="sum")) / 2
        s_ok, e_ok = start.argmax(-1).eq(s_gold), end.argmax(-1).eq(e_gold)
        n = s_gold.numel()
        return loss, n, {
            "loss": loss.data, "ntokens": sample["ntokens"], "nsentences": n, "sample_size": n,
            "start_correct": int(s_ok.sum()), "end_correct": int(e_ok.sum()), "span_correct": int((s_ok & e_ok).sum()),
        }

    @staticmethod
    def reduce_metrics(logging_outputs):
        def total(key):
            return sum(log.get(key, 0) for log in logging_outputs)

        n = total("sample_size")
        if n == 0:
            return
        metrics.log_scalar("loss", float(total("loss")) / n, n, round=3)
        for name in ("start", "end", "span"):
            metrics.log_scalar(f"{name}_acc", 100.0 * total(f"{name}_correct") / n, n, round=1)

    @staticmethod
    def logging_outputs_can_be_summed():
        return True
