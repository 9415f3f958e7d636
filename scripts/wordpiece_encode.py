#!/usr/bin/env python
"""Encode text with a BERT vocab.txt into the converted dictionary's symbols, one output
line per input line (used by prepare_data.sh --wordpiece-vocab and s2s/prepare.sh; logic in
fairseq_pmlm/weights/wordpiece.py; run with --help for the options)."""
import recipe_info  # noqa: F401  (first: enters the plugin package without fairseq's import, see there)

# isort: split
from fairseq_pmlm.weights.wordpiece import main

if __name__ == "__main__":
    main()
