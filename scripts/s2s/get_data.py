#!/usr/bin/env python
"""The command line of fairseq_pmlm/public_data/cnndm_xsum.py: CNN/DailyMail or XSum, from a public
release as you hold it, to the raw files scripts/s2s/prepare.sh reads (``--help`` says how)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for lib/
from lib.import_guard import interruptible, without_registration  # noqa: E402

without_registration()  # it needs no fairseq
with interruptible("get_data.py"):
    from fairseq_pmlm.public_data.cnndm_xsum import main

if __name__ == "__main__":
    sys.exit(main())
