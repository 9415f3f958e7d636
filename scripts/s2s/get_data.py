#!/usr/bin/env python
"""The command line of fairseq_pmlm/public_data/cnndm_xsum.py: CNN/DailyMail or XSum, from a public
release as you hold it, to the raw files scripts/s2s/prepare.sh reads (``--help`` says how)."""
import sys

from fairseq_pmlm.public_data.cnndm_xsum import main

if __name__ == "__main__":
    sys.exit(main())
