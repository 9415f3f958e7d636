"""fairseq-pmlm: UniLMv2's pseudo-masked language model as a fairseq plugin.

Load with ``--user-dir fairseq_pmlm`` or ``import fairseq_pmlm``; importing registers the
tasks ``pseudo_masked_lm``, ``pmlm_seq2seq`` and ``pmlm_squad``, the ``unilmv2*``
architectures (with classification heads for fairseq's own ``sentence_prediction``), the
``pmlm``, ``pmlm_seq2seq`` and ``pmlm_squad`` criteria and the ``rouge`` scorer.

Importing also changes some of fairseq's behaviour process-wide (atomic checkpoint files,
preemption, a clean exit, quiet imports, one-line errors): docs/DESIGN.md §8 is the one list of those
changes, each with the fairseq behaviour it replaces and the test that pins it.
"""
# the order in which these were always imported (atexit hooks run in reverse order)
# isort: off
from .runtime import quiet  # first: it notes the root logger before fairseq's import changes it
from .runtime import checkpoint_files  # noqa: F401  (installs its changes)
from .errors import install_one_line_errors
from . import criterions, models  # noqa: F401  (registers them)
from .runtime import (  # noqa: F401  (install their changes)
    batched_optimizer_loops, bert_bpe, complete_batches, fused_adam, preemption, safe_exit, tpu_mode)
from . import tasks  # noqa: F401  (registers them)
from .scoring import rouge  # noqa: F401  (registers the scorer)
# isort: on

install_one_line_errors()  # a OneLineError reaching the top of a program: its line, exit 2
quiet.restore_root_logger()  # as it was before fairseq's import set it to DEBUG

__version__ = "0.1.0"
