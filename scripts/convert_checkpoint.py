#!/usr/bin/env python
"""Released BERT / UniLMv2 weights <-> fairseq checkpoints of this plugin.
The logic lives in fairseq_pmlm/weights/convert.py (run with --help for the options)."""
import sys

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the import

with interruptible("convert_checkpoint.py"):
    from fairseq_pmlm.weights.convert import main

if __name__ == "__main__":
    sys.exit(main())
