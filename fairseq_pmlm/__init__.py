"""fairseq-pmlm: UniLMv2's pseudo-masked language model as a fairseq plugin.

Load with ``--user-dir fairseq_pmlm`` or ``import fairseq_pmlm``; importing registers the
task ``pseudo_masked_lm``, the ``unilmv2*`` architectures and the ``pmlm`` criterion.
"""
from . import criterions, models, tasks  # noqa: F401  (registration side effects)

__version__ = "0.1.0"
