"""The PMLM attention-permission rule: the one place that decides who may see whom.

Every token carries a compact description, two small integers:
  kind: PAD, CONTEXT (incl. [MASK]), PSEUDO ([P]) or ORIGINAL (an appended copy of
        a masked token, or a target token in sequence-to-sequence fine-tuning);
  step: the factorization step it belongs to (0 for context and padding).
The dense L x L mask is derived from these on the model's device, never collated.

The same rule serves pre-training (docs/DESIGN.md §3), sequence-to-sequence fine-tuning
(§4: source = context, target token t = ORIGINAL of step t, its [P] = PSEUDO of step t)
and incremental decoding (§5: the cached keys keep their kind/step). The table: §1.
"""
from typing import NamedTuple

import torch
import torch.nn.functional as F

PAD, CONTEXT, PSEUDO, ORIGINAL = 0, 1, 2, 3


class TokenDescription(NamedTuple):
    """What the model knows of each token besides its id, as [B, T] integer tensors: the rule
    reads ``kinds`` and ``steps``, the relative-position bias ``positions``."""

    kinds: torch.Tensor
    steps: torch.Tensor
    positions: torch.Tensor

    def columns(self, start, end=None):
        """The description of columns [start, end)."""
        return TokenDescription(*(t[:, start:end] for t in self))

    def take(self, columns):
        """The description of the columns ``columns`` [B, R] of each row (``ReadCells.columns``)."""
        return TokenDescription(*(t.gather(1, columns) for t in self))

    def first_row(self):
        """The description of the first row alone ([1, T]): what a bias shared by every row reads."""
        return TokenDescription(*(t[:1] for t in self))

    def padded(self, multiple):
        """The description with PAD columns (step 0, position 0) appended up to a multiple of
        ``multiple`` columns."""
        extra = -self.kinds.size(1) % multiple
        if not extra:
            return self
        return TokenDescription(*(F.pad(t, (0, extra), value=PAD if t is self.kinds else 0) for t in self))


def attention_allowed(q_kind, q_step, k_kind, k_step):
    """Boolean [..., Tq, Tk]: may query i attend to key j?

    Args are [..., Tq] (queries) and [..., Tk] (keys) integer tensors; the rule itself is
    ``pair_allowed``.
    """
    return pair_allowed(q_kind.unsqueeze(-1), q_step.unsqueeze(-1), k_kind.unsqueeze(-2), k_step.unsqueeze(-2))


def pair_allowed(qk, qs, kk, ks):
    """The rule for query (kind ``qk``, step ``qs``) and key (``kk``, ``ks``), elementwise over
    tensors that broadcast together: the dense mask above and flex attention's ``mask_mod``
    (scalars per (query, key)) both read it here.
    - context keys are visible to every query (padding queries too, so no softmax row
      is empty; padding outputs are never used);
    - an ORIGINAL key of step s is visible to [P] queries of steps > s and to ORIGINAL
      queries of steps >= s (never to context: that would leak implicitly);
    - a [P] key of step s is visible only to the [P] queries of the same step;
    - padding keys are visible to nobody.
    """
    q_pseudo, q_orig = qk == PSEUDO, qk == ORIGINAL
    see_context = kk == CONTEXT
    see_original = (kk == ORIGINAL) & ((q_pseudo & (ks < qs)) | (q_orig & (ks <= qs)))
    see_pseudo = (kk == PSEUDO) & q_pseudo & (ks == qs)
    return see_context | see_original | see_pseudo
