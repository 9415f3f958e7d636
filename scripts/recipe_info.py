#!/usr/bin/env python
"""Facts the shell recipes need, one per line (scripts/lib/common.sh runs it as ``recipe_info``):
the command line of fairseq_pmlm/recipe_info/, where the subcommands are listed."""
import sys

from fairseq_pmlm.recipe_info import main

if __name__ == "__main__":
    sys.exit(main())
