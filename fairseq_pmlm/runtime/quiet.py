"""Keep third-party deprecation notices out of the plugin's commands (docs/DESIGN.md §8).

fairseq 0.12 drives Hydra 1.3 through APIs that Hydra has since deprecated, and torch through
some that torch has; every fairseq command with ``--user-dir fairseq_pmlm`` would print a dozen
warning lines around its own output, none of which a user can act on. Importing the plugin
(what ``--user-dir`` does, before fairseq composes its config) ignores exactly these messages,
matched from their first words. Nothing else is filtered: errors and every other warning print.

And Hydra's debug lines: importing fairseq sets the root logger to DEBUG (a stray
``logging.basicConfig(level=DEBUG)`` in fairseq/models/wav2vec/wav2vec2_classification.py), so
fairseq-validate, fairseq-generate and others print Hydra's "Setting JobRuntime" lines; Hydra's
logger is kept at INFO (its warnings and errors still print). rouge-score's absl logger says
"Using default tokenizer." each time a scorer is made: kept at WARNING.
"""
import logging
import warnings

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
