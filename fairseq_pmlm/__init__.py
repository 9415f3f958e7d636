"""fairseq-pmlm: UniLMv2's pseudo-masked language model as a fairseq plugin.

Load with ``--user-dir fairseq_pmlm`` or ``import fairseq_pmlm``; importing registers the
tasks ``pseudo_masked_lm``, ``pmlm_seq2seq`` and ``pmlm_squad``, the ``unilmv2*``
architectures (with classification heads for fairseq's own ``sentence_prediction``), the
``pmlm``, ``pmlm_seq2seq`` and ``pmlm_squad`` criteria and the ``rouge`` scorer.

Importing also changes these things process-wide (docs/DESIGN.md §8):
- ``quiet``: Hydra's and torch's deprecation notices that fairseq triggers are not printed
  (by message; every other warning and every error still is);
- ``safe_exit``: an ``atexit`` hook lets fairseq's data-prefetch threads park before the
  interpreter finalises, so a run that stops mid-epoch exits 0 instead of aborting (134);
- ``checkpoint_files``: fairseq writes every checkpoint file atomically (temp file, fsync,
  rename), so a kill at any instant leaves each one whole; an unreadable checkpoint, a missing
  ``--restore-file`` and a checkpoint already at ``--max-update`` stop with one line;
- ``preemption``: during training, SIGTERM/SIGUSR1 save a checkpoint at the next update
  boundary (all ranks agree on which) and exit 128 + the signal number.
"""
from . import checkpoint_files, criterions, models, preemption, quiet, safe_exit, scoring, tasks  # noqa: F401  (above)

__version__ = "0.1.0"
