"""fairseq-pmlm: UniLMv2's pseudo-masked language model as a fairseq plugin.

Load with ``--user-dir fairseq_pmlm`` or ``import fairseq_pmlm``; importing registers the
tasks ``pseudo_masked_lm``, ``pmlm_seq2seq`` and ``pmlm_squad``, the ``unilmv2*``
architectures (with classification heads for fairseq's own ``sentence_prediction``), the
``pmlm``, ``pmlm_seq2seq`` and ``pmlm_squad`` criteria and the ``rouge`` scorer.

Importing also changes some of fairseq's behaviour process-wide (atomic checkpoint files,
preemption, a clean exit, quiet imports): ``runtime/__init__.py`` is the one list of those
changes, each with the fairseq behaviour it replaces and the test that pins it.

Modules that moved keep their old import paths (``fairseq_pmlm.checkpoint_files`` is
``fairseq_pmlm.runtime.checkpoint_files``, one module under two names), registered here for the
root and in ``weights/__init__.py`` and ``data/__init__.py`` for theirs.
"""
import importlib.abc
import importlib.util
import sys

# the order in which these were always imported (atexit hooks run in reverse order)
# isort: off
from .runtime import checkpoint_files
from . import criterions, models  # noqa: F401  (registers them)
from .runtime import fused_adam, preemption, quiet, safe_exit  # noqa: F401
from . import scoring, tasks  # noqa: F401  (registers them)
# isort: on
from .runtime import interrupts, process_group_guard

__version__ = "0.1.0"

for _module in (checkpoint_files, preemption, quiet, safe_exit, interrupts, process_group_guard):
    sys.modules[f"{__name__}.{_module.__name__.rsplit('.', 1)[1]}"] = _module

_LAUNCHER, _OLD_LAUNCHER = f"{__name__}.runtime.distributed_train", f"{__name__}.distributed_train"


class _LauncherAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``fairseq_pmlm.distributed_train``, the launcher's old name (job scripts run it with
    ``python -m``), as ``runtime.distributed_train``, one module under both names. Found only
    when asked for, unlike the aliases above: made at the plugin's import, it would import the
    launcher before ``python -m fairseq_pmlm.runtime.distributed_train`` runs it, which runpy
    warns about on every rank."""

    def find_spec(self, name, path=None, target=None):
        if name != _OLD_LAUNCHER:
            return None
        return importlib.util.spec_from_loader(name, self, origin=importlib.util.find_spec(_LAUNCHER).origin)

    def create_module(self, spec):
        module = importlib.import_module(_LAUNCHER)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec  # the import machinery set the alias's

    def get_code(self, name):  # ``python -m fairseq_pmlm.distributed_train``: the launcher's code
        return importlib.util.find_spec(_LAUNCHER).loader.get_code(_LAUNCHER)


if not any(isinstance(finder, _LauncherAlias) for finder in sys.meta_path):
    sys.meta_path.append(_LauncherAlias())
