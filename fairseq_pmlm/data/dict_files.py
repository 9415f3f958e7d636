"""Where a data directory keeps its dictionary, for every reader: the tasks, the hub, the exporter
and the recipes' facts (no fairseq import here: ``scripts/recipe_info.py`` stays light).

    dict.txt               pre-training (fairseq-preprocess --only-source), the GLUE/SQuAD tasks
    dict.SOURCE_LANG.txt   sentence pairs: dict.source.txt from s2s/prepare.sh, dict.src.txt from a
                           fairseq-preprocess run with --source-lang src
    input0/dict.txt        fairseq's sentence_prediction (GLUE) layout
"""
import os


def dict_names(source_lang="source"):
    """The names, in the order looked for (``source_lang`` None or empty: a config that records
    none, as a pre-training checkpoint's: prepare.sh's ``source``)."""
    return ("dict.txt", f"dict.{source_lang or 'source'}.txt", os.path.join("input0", "dict.txt"))


def dictionary_in(directory, source_lang="source"):
    """``directory``'s dictionary file (the first of ``dict_names`` there), None if it has none."""
    return next((os.path.join(directory, n) for n in dict_names(source_lang) if directory and
                 os.path.isfile(os.path.join(directory, n))), None)
