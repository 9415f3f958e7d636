#!/usr/bin/env python
"""Encode text with a BERT vocab.txt into the converted dictionary's symbols, one output
line per input line (used by prepare_data.sh --wordpiece-vocab; logic in
fairseq_pmlm/weights/wordpiece.py)."""
import os
import sys

import types

# fairseq_pmlm/__init__.py imports fairseq for its registrations (5-10 s); the encoder needs only
# weights/vocab.py and weights/wordpiece.py, so a bare stand-in package skips that import
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
package = types.ModuleType("fairseq_pmlm")
package.__path__ = [os.path.join(ROOT, "fairseq_pmlm")]
sys.modules["fairseq_pmlm"] = package

from fairseq_pmlm.weights.wordpiece import main  # noqa: E402

if __name__ == "__main__":
    main()
