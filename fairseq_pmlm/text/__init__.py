"""Text and tokenisers, used by the data recipes (``data/databin/``), the tasks, the hub and the
weight conversion alike, so that none of them reaches into another for them. Nothing here imports
fairseq or torch (the recipes' fairseq-free helpers read these modules), and this ``__init__``
imports nothing.

- ``input_text``: raw text from outside (fairseq-interactive's stdin, the hub's strings): bytes
  that are not UTF-8 become U+FFFD with a warning instead of ending the session. (The data-bin's
  own line rules, ``\\n`` line ends and UTF-8 or a ``FILE:LINE`` error, are its reading stage,
  ``data/databin/reading.py``.)
- ``vocab``: a BERT WordPiece ``vocab.txt`` <-> the plugin's fairseq dictionary rows, both ways.
  Here rather than in ``weights/`` because tokenising needs it as much as converting does:
  WordPiece ids are named by the dictionary symbols it gives them (``wordpiece``), and a WordPiece
  data-bin's dictionary is its ``dict_txt``; the export's inverse (``symbols_to_vocab``,
  ``uncut_vocab``) is the same mapping, kept beside it so the rule has one home.
- ``wordpiece``: BERT WordPiece (transformers' ``BertTokenizer``) as fairseq symbols, and the
  ``tokenizer.json`` an export ships for a cut dictionary;
- ``tokenizer_files``: which tokenizer (``spm.model`` or ``vocab.txt``) a data or model directory
  holds beside its dictionary, the fairseq flags for it, and a piece encoder for either;
- ``token_ids``: lines -> tokeniser ids in batches (sentencepiece and WordPiece, the sentence
  separator one id of its own) and the id -> dictionary-row table of the data-bin engine;
- ``lines``: the lines of a one-example-a-line file as every command counts them (``\n`` only, a
  last line without one counts).
"""
