"""Datasets, masking and input checks; ``databin/`` is the raw text -> data-bin engine. The rules
for raw text from outside (``input_text``) are ``text/``; its old path here
(``fairseq_pmlm.data.input_text``) is the same module."""
import sys

from ..text import input_text

sys.modules[f"{__name__}.input_text"] = input_text
