"""fairseq scorer ``rouge`` (``fairseq-generate --scoring rouge``): ROUGE-1/2/L/Lsum F1 in
percent, averaged over sentences, as papers report it. Summaries are split into sentences at
``[X_SEP]`` (the separator CNN/DailyMail targets carry): ROUGE-Lsum is the summary-level LCS over
them, ROUGE-1/2/L see the summary without the separator (``summaries.py`` has the rules).
``--rouge-tokenizer rouge155`` counts tokens as ROUGE-1.5.5 does (what ``s2s/generate.sh``'s
``cnndm`` and ``xsum`` presets use); the default is ``rouge-score``'s."""
from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.scoring import BaseScorer, register_scorer

from ..symbols import SENTENCE_SEP
from .summaries import ROUGE_TYPES, TOKENIZERS, rouge_per_example, rouge_scores  # noqa: F401  (the API)


@dataclass
class RougeScorerConfig(FairseqDataclass):
    rouge_stemmer: bool = field(default=True, metadata={"help": "Porter stemming, as the original ROUGE-1.5.5 -m"})
    rouge_tokenizer: ChoiceEnum(TOKENIZERS) = field(
        default="rouge-score", metadata={"help": "rouge155: ROUGE-1.5.5's own tokens and stemmer (its exception "
                                                  "lists); rouge-score: the rouge-score package's"})
    rouge_separator: str = field(
        default=SENTENCE_SEP, metadata={"help": "the symbol between sentences in the detokenised text: [X_SEP], or "
                                                "the [unusedN] row a WordPiece vocabulary carries it in "
                                                "(scripts/recipe_info.py separator DATA)"})


@register_scorer("rouge", dataclass=RougeScorerConfig)
class RougeScorer(BaseScorer):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.use_stemmer = cfg.rouge_stemmer
        self.tokenizer = str(cfg.rouge_tokenizer)
        self.separator = cfg.rouge_separator

    def scores(self):
        ref, pred = self.ref, self.pred
        if self.separator and self.separator != SENTENCE_SEP:
            ref, pred = ([s.replace(self.separator, SENTENCE_SEP) for s in x] for x in (ref, pred))
        return rouge_scores(ref, pred, self.use_stemmer, self.tokenizer)

    def score(self):
        return self.scores()["rougeL"]

    def result_string(self):
        s = self.scores()
        return "ROUGE-1 {:.2f} ROUGE-2 {:.2f} ROUGE-L {:.2f} ROUGE-Lsum {:.2f} (F1, {} sentences)".format(
            s["rouge1"], s["rouge2"], s["rougeL"], s["rougeLsum"], len(self.ref)
        )
