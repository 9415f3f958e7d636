#!/usr/bin/env python
"""The command line of fairseq_pmlm/public_data/glue.py: one GLUE task folder -> the binarized
layout of fairseq's sentence_prediction task (``--help`` says how)."""
import sys

from fairseq_pmlm.public_data.glue import main

if __name__ == "__main__":
    sys.exit(main())
