"""Moving weights between released BERT/UniLMv2 checkpoints and this plugin's fairseq
checkpoints (docs/DESIGN.md §7). Nothing here registers fairseq components, so the plugin's
``__init__`` does not import it and ``--user-dir`` stays free of ``transformers``.

- ``vocab``: a BERT ``vocab.txt`` <-> the fairseq dictionary's row order;
- ``layouts``: Hugging Face BERT / released UniLMv2 key layouts <-> the model's keys;
- ``checkpoint``: fairseq checkpoint files (cfg + state) and atomic directory writes;
- ``convert``: the two operations, import and export, and their command line.
"""
