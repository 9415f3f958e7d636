#!/usr/bin/env python
"""Raw text -> fairseq data-bin, streamed and in parallel: what prepare_data.sh and
s2s/prepare.sh run (logic in fairseq_pmlm/data/databin/; --help for the options)."""
import sys

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the import

# the recipe that runs it names itself with --prog (prepare_data.sh, s2s/prepare.sh)
PROG = sys.argv[sys.argv.index("--prog") + 1] if "--prog" in sys.argv[1:-1] else "text_to_databin.py"
with interruptible(PROG):
    from fairseq_pmlm.data.databin.cli import main

if __name__ == "__main__":
    sys.exit(main())
