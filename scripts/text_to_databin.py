#!/usr/bin/env python
"""Raw text -> fairseq data-bin, streamed and in parallel: what prepare_data.sh and
s2s/prepare.sh run (logic in fairseq_pmlm/data/databin/; --help for the options)."""
import sys

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the import

with interruptible("text_to_databin.py"):
    from fairseq_pmlm.data.databin.cli import main

if __name__ == "__main__":
    sys.exit(main())
