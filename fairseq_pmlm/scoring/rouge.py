"""fairseq scorer ``rouge`` (``fairseq-generate --scoring rouge``): ROUGE-1/2/L/Lsum F1 from
the ``rouge-score`` package, averaged over sentences, in percent (as papers report it)."""
from dataclasses import dataclass, field

from fairseq.dataclass import FairseqDataclass
from fairseq.scoring import BaseScorer, register_scorer

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


@dataclass
class RougeScorerConfig(FairseqDataclass):
    rouge_stemmer: bool = field(default=True, metadata={"help": "Porter stemming, as the original ROUGE-1.5.5 -m"})


def rouge_per_example(references, hypotheses, use_stemmer=True):
    """F1 (%) of each (reference, hypothesis) pair: {ROUGE type: [score per example]}.
    Lsum splits summaries into sentences at newlines."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    out = {name: [] for name in ROUGE_TYPES}
    for ref, hyp in zip(references, hypotheses):
        for name, score in scorer.score(ref, hyp).items():
            out[name].append(100 * score.fmeasure)
    return out


def rouge_scores(references, hypotheses, use_stemmer=True):
    """Mean F1 (%) per ROUGE type, over the examples."""
    per = rouge_per_example(references, hypotheses, use_stemmer)
    return {name: sum(v) / max(len(v), 1) for name, v in per.items()}


@register_scorer("rouge", dataclass=RougeScorerConfig)
class RougeScorer(BaseScorer):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.use_stemmer = cfg.rouge_stemmer

    def scores(self):
        return rouge_scores(self.ref, self.pred, self.use_stemmer)

    def score(self):
        return self.scores()["rougeL"]

    def result_string(self):
        s = self.scores()
        return "ROUGE-1 {:.2f} ROUGE-2 {:.2f} ROUGE-L {:.2f} ROUGE-Lsum {:.2f} (F1, {} sentences)".format(
            s["rouge1"], s["rouge2"], s["rougeL"], s["rougeLsum"], len(self.ref)
        )
