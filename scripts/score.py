#!/usr/bin/env python
"""Score hypothesis files against a reference file: ROUGE (the papers' presets too), BLEU, paired
bootstrap intervals, examples. The command line of fairseq_pmlm/scoring/score_files.py, where its
options are described (or run it with --help)."""
import sys

from lib.import_guard import interruptible, without_registration  # scripts/lib: Ctrl-C during the import

without_registration()  # it needs no fairseq
with interruptible("score.py"):
    from fairseq_pmlm.scoring.score_files import main

if __name__ == "__main__":
    with interruptible("score.py"):  # it writes only to stdout: Ctrl-C while scoring too
        sys.exit(main())
