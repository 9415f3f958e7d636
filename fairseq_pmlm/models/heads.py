"""Task heads on top of the UniLMv2 Transformer (docs/DESIGN.md §6).

- ``SentenceClassificationHead``: BERT's pooler on the final [SOS] vector (dense -> tanh),
  dropout, then a projection to the classes (1 output for regression, as fairseq's
  ``sentence_prediction --regression-target`` expects).
- ``SpanPredictionHead``: one linear layer giving every token a start and an end logit
  (extractive QA); position 0, the [SOS], doubles as the "no answer" span of SQuAD v2.0,
  as in BERT's SQuAD recipe that UniLMv2's fine-tuning followed.

The attribute names (``dense``, ``out_proj``) match RoBERTa's head, so the checkpoint-upgrade
logic (drop a head of other dimensions, keep the current one) reads the same sizes.
"""
import torch.nn as nn


class SentenceClassificationHead(nn.Module):
    def __init__(self, dim, inner_dim, num_classes, dropout):
        super().__init__()
        self.dense = nn.Linear(dim, inner_dim)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(inner_dim, num_classes)
        for m in (self.dense, self.out_proj):  # BERT's initialisation, like the body's
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)

    def forward(self, sos):
        """``sos``: [B, C] final hidden state of [SOS] -> [B, num_classes]."""
        return self.out_proj(self.dropout(self.dense(sos).tanh()))


class SpanPredictionHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.out_proj = nn.Linear(dim, 2)
        nn.init.normal_(self.out_proj.weight, std=0.02)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, x):
        """``x``: [B, T, C] -> (start, end) logits, each [B, T]."""
        start, end = self.out_proj(x).unbind(-1)
        return start, end
