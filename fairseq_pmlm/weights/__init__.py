"""Moving weights between released BERT/UniLMv2 checkpoints and this plugin's fairseq
checkpoints (docs/DESIGN.md §7). Nothing here registers fairseq components, so the plugin's
``__init__`` does not import it and ``--user-dir`` stays free of ``transformers``.

- ``layouts``: Hugging Face BERT / released UniLMv2 key layouts <-> the model's keys;
- ``checkpoint``: fairseq checkpoint files (cfg + state) and atomic directory writes;
- ``s2sft``: what s2s-ft's fine-tuned saves and its loader add to the UniLMv2 layout;
- ``released``: released weights installed from the package registry, unpacked and hash checked;
- ``convert``: import, and the command line of both operations;
- ``export``: export, to Hugging Face (with ``hf_modeling``, the modeling code an export ships,
  which needs only torch and transformers) or to s2s-ft's UniLMv2 layout.

The vocabulary mapping (a BERT ``vocab.txt`` <-> the fairseq dictionary's row order), WordPiece
and the tokenizer files beside a dictionary are ``text/`` (the data recipes, tasks and hub use
them too).
"""
