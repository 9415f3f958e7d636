#!/usr/bin/env python
"""Released BERT / UniLMv2 weights <-> fairseq checkpoints of this plugin.
The logic lives in fairseq_pmlm/weights/convert.py (run with --help for the options)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # works without pip install -e

from fairseq_pmlm.weights.convert import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
