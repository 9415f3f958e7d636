#!/usr/bin/env python
"""Facts the shell recipes need, one per line (scripts/lib/common.sh runs it as ``recipe_info``):
the command line of fairseq_pmlm/recipe_info/, where the subcommands are listed."""
import sys

from lib.import_guard import without_registration  # scripts/lib

without_registration()
from fairseq_pmlm.recipe_info import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
