"""Keep third-party deprecation notices out of the plugin's commands (docs/DESIGN.md §8).

fairseq 0.12 drives Hydra 1.3 through APIs that Hydra has since deprecated, and torch through
some that torch has; every fairseq command with ``--user-dir fairseq_pmlm`` would print a dozen
warning lines around its own output, none of which a user can act on. Importing the plugin
(what ``--user-dir`` does, before fairseq composes its config) ignores exactly these messages,
matched from their first words. Nothing else is filtered: errors and every other warning print.

And the root logger: importing fairseq runs a stray ``logging.basicConfig(level=DEBUG)``
(fairseq/models/wav2vec/wav2vec2_classification.py). Where nothing had configured logging before,
as in Python use (``import fairseq_pmlm``, the hub), that left a DEBUG handler on stderr behind, and
every library's debug lines printed (one matplotlib plot: 153 lines); the plugin's import puts the
root logger back as it found it (``restore_root_logger``). Where a program had configured it first
(fairseq's commands, at INFO, before they import fairseq) the call did nothing and nothing is undone;
there Hydra's logger is kept at INFO, or fairseq-validate, fairseq-generate and others print its
"Setting JobRuntime" lines (its warnings and errors still print). rouge-score's absl logger says
"Using default tokenizer." each time a scorer is made: kept at WARNING.
"""
import logging
import sys
import warnings

# the root logger before fairseq's import: this module is the plugin's first import (None: fairseq
# was imported before the plugin, and whatever it did to logging stays)
_ROOT_BEFORE = None if "fairseq" in sys.modules else (logging.getLogger().level, list(logging.getLogger().handlers))

NOTICES = (  # (category, message): the start of each notice, as the library words it
    # Hydra, from fairseq's hydra_init / compose (fairseq/dataclass/initialize.py, utils.py)
    (UserWarning, r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental"),
    (UserWarning, r"\s*The version_base parameter is not specified"),  # Hydra14MigrationWarning
    (UserWarning, r"In '\w+': Usage of deprecated keyword in package header"),
    (UserWarning, r"\s*'\w+' is validated against ConfigStore schema with the same name"),
    (UserWarning, r"\s*The strict flag in the compose API is deprecated"),
    # torch, from fairseq's trainer and data loader
    (FutureWarning, r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated"),
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found"),
)


def ignore_notices():
    for category, message in NOTICES:
        warnings.filterwarnings("ignore", message=message, category=category)
    logging.getLogger("hydra").setLevel(logging.INFO)
    logging.getLogger("absl").setLevel(logging.WARNING)


ignore_notices()


def restore_root_logger():
    """Undo fairseq's import-time ``basicConfig(level=DEBUG)`` where it took effect: the root logger
    had no handler before the import and has one more now (basicConfig's). A program that had
    configured logging keeps what it chose."""
    if _ROOT_BEFORE is None:
        return
    root, (level, before) = logging.getLogger(), _ROOT_BEFORE
    added = [h for h in root.handlers if h not in before]
    if not before and len(added) == 1 and root.level == logging.DEBUG:
        root.removeHandler(added[0])
        added[0].close()
        root.setLevel(level)
