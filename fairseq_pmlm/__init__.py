"""fairseq-pmlm: UniLMv2's pseudo-masked language model as a fairseq plugin.

Load with ``--user-dir fairseq_pmlm`` or ``import fairseq_pmlm``; importing registers the
tasks ``pseudo_masked_lm``, ``pmlm_seq2seq`` and ``pmlm_squad``, the ``unilmv2*``
architectures (with classification heads for fairseq's own ``sentence_prediction``), the
``pmlm``, ``pmlm_seq2seq`` and ``pmlm_squad`` criteria and the ``rouge`` scorer.
"""
from . import criterions, models, safe_exit, scoring, tasks  # noqa: F401  (registration side effects)

__version__ = "0.1.0"
