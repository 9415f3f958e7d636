"""The pre-training objectives (the paper's Table 6), each with the parts its examples hold: the one
list that the task's ``--objective``, the masking, the criterion's logging and the ablation driver
read (no fairseq import).

- AE: the masked context tokens are predicted where they stand (BERT's masked LM);
- PAR: after the context, one [P] block a masked block, each predicting its tokens, a step
  seeing the originals of the steps before it (partially autoregressive);
- AR: PAR with every masked block one token.
"""
from dataclasses import dataclass

# the criterion's loss parts, logged as ae_loss/ae_acc and par_loss/par_acc: AE predicts at the
# context, PAR (and AR) at the appended [P] tokens
LOSS_PARTS = ("ae", "par")


@dataclass(frozen=True)
class Objective:
    name: str  # --objective
    ae: bool  # the AE part
    par: bool  # the appended [P] blocks (PAR, or AR with one_token_blocks)
    one_token_blocks: bool = False  # AR: masked blocks are single tokens (no n-grams)
    note: str = ""  # shown beside the name in --objective's help

    @property
    def loss_parts(self):
        """The ``LOSS_PARTS`` this objective trains."""
        return tuple(p for p in LOSS_PARTS if getattr(self, p))


# in the paper's Table 6 order; ae+par is PMLM, the task's default
OBJECTIVES = (
    Objective("ae", ae=True, par=False, note="MLM"),
    Objective("ar", ae=False, par=True, one_token_blocks=True),
    Objective("par", ae=False, par=True),
    Objective("ae+ar", ae=True, par=True, one_token_blocks=True),
    Objective("ae+par", ae=True, par=True, note="PMLM"),
)
NAMES = tuple(o.name for o in OBJECTIVES)
HELP = "pre-training objective (paper Table 6): " + ", ".join(
    o.name + (f" ({o.note})" if o.note else "") for o in OBJECTIVES)


def objective(name):
    """The ``Objective`` called ``name``; a ValueError naming the known ones otherwise."""
    for o in OBJECTIVES:
        if o.name == name:
            return o
    raise ValueError(f"unknown objective {name!r} (known: {', '.join(NAMES)})")
