"""fairseq criterion ``pmlm_seq2seq``: label-smoothed cross-entropy on the [P] outputs.

The ``unilmv2`` model returns logits only for the [P] tokens (one per target token, EOS
included), so this is fairseq's ``label_smoothed_cross_entropy`` with s2s-ft's defaults:
smoothing 0.1 and accuracy reported (logs loss, nll_loss, ppl, accuracy).
"""
from dataclasses import dataclass, field

from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)


@dataclass
class PMLMSeq2SeqCriterionConfig(LabelSmoothedCrossEntropyCriterionConfig):
    label_smoothing: float = field(default=0.1, metadata={"help": "label smoothing epsilon (s2s-ft: 0.1)"})
    report_accuracy: bool = field(default=True, metadata={"help": "log token accuracy of the [P] predictions"})


@register_criterion("pmlm_seq2seq", dataclass=PMLMSeq2SeqCriterionConfig)
class PMLMSeq2SeqCriterion(LabelSmoothedCrossEntropyCriterion):
    def unlogged_metric(self, metric):
        """One line if --best-checkpoint-metric names what validation never logs (rouge, bleu: it
        decodes nothing), before training: fairseq's KeyError came after the first validation."""
        logged = ["loss", "nll_loss", "ppl"] + ["accuracy"] * bool(self.report_accuracy)
        if metric in logged:
            return None
        return (f"--best-checkpoint-metric {metric}: pmlm_seq2seq's validation logs {', '.join(logged)} (it decodes "
                "nothing: ROUGE comes from scripts/s2s/generate.sh after training)")
