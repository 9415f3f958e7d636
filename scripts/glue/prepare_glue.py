#!/usr/bin/env python
"""The command line of fairseq_pmlm/public_data/glue.py: one GLUE task folder -> the binarized
layout of fairseq's sentence_prediction task (``--help`` says how)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for lib/
from lib.import_guard import interruptible  # noqa: E402

with interruptible("prepare_glue.py"):
    from fairseq_pmlm.public_data.glue import main

if __name__ == "__main__":
    sys.exit(main())
