"""Scores: ``rouge`` (the fairseq scorer, registered by the plugin's ``__init__``), ``summaries``
(ROUGE of summaries), ``rouge155`` (the Perl reference), ``squad_eval``, and ``score_files`` (the
command line of scripts/score.py). This ``__init__`` imports nothing: scoring files needs no fairseq."""
