"""Datasets, masking and input checks; ``databin/`` is the raw text -> data-bin engine. The rules
for raw text from outside (``input_text``) are ``text/``."""
