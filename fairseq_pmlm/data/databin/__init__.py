"""Raw text -> fairseq data-bin, streamed and in parallel: the engine of ``prepare_data.sh``
(documents, optional shards) and ``s2s/prepare.sh`` (source/target pairs); its command line is
``scripts/text_to_databin.py`` (``cli.main``).

How it scales (numbers in docs/BENCHMARKS.md):
- each input is cut into parts of ~``PART_BYTES`` at line starts; ``--workers`` processes
  tokenise their parts in batches of lines (Hugging Face ``tokenizers`` for WordPiece,
  sentencepiece's batch encoder) and write the ids straight into a part file, so memory is
  bounded by a batch, not by the input, and no per-token Python string work is done;
- the parts are concatenated in order into fairseq's mmap format (``train.bin``/``.idx``)
  through a lookup table from tokeniser ids to dictionary rows; the index is written with
  numpy, never as a Python list.

The output is byte for byte what the old route gave (tokeniser -> text pieces ->
``fairseq-preprocess``), including a dictionary built from the training text (counts sorted
as fairseq's ``Dictionary.finalize`` sorts them, padded to a multiple of 8), with three
exceptions: with sentencepiece a NUL is ``<unk>`` (the old route gave it a row of its own) and
U+0085 stays a token (``fairseq-preprocess`` splits lines on it as on a space), and the end of one
``--train`` file ends its last document (the old route, fed ``cat``'s output, ran it into the next).

Lines end at ``\\n`` only, as ``wc -l`` counts them: a ``\\r`` before it is dropped and any other
``\\r`` is a space (Python's universal newlines would split a line there and shift every later
pair). Text must be UTF-8: a bad byte stops with ``FILE:LINE: ...``. Everything is built in a
temporary directory beside the output and renamed into place; nothing is left on an error,
Ctrl-C or SIGTERM.

The stages, each a module (the tokenisers and the id -> dictionary-row table are
``text/token_ids.py``):
- ``reading``: lines of a byte range (the line-ending and UTF-8 rules), cutting inputs into parts
  and shards at line and document starts, the tunables ``PART_BYTES``/``MIN_PART_BYTES``/``BATCH_LINES``;
- ``workers``: the worker processes and ``encode_part`` (a part's lines -> a part file of ids);
- ``dictionary``: the dictionary of new text, or a given one checked;
- ``writer``: part files -> ``.bin``/``.idx``, and the tokenizer files beside the dictionary;
- ``prepare``: one run (``Preparer``: temporary directory, workers, progress and summary lines);
- ``corpus`` and ``pairs``: the two recipes (``prepare_data.sh``, ``s2s/prepare.sh``);
- ``cli``: the command line.
"""
from ...errors import OneLineError


class PrepareError(OneLineError):
    """A bad input or environment; its message is the one line the user sees."""
