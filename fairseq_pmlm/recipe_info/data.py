"""Facts of a data directory beyond its tokenizer (``text.tokenizer_files``) and item counts
(``data.databin.writer.index_items``): the separator symbol, a SQuAD file's training windows."""
import logging
import os

from ..symbols import separator_symbol


def separator_of(directory):
    """The dictionary symbol that carries the sentence separator in a data directory's target
    dictionary (dict.target.txt, else dict.txt), or None: what the model emits between sentences."""
    for name in ("dict.target.txt", "dict.txt"):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return separator_symbol([line.split(" ")[0] for line in f])
    raise ValueError(f"{directory} has no dict.target.txt or dict.txt")




def squad_windows(data, train_json, max_positions, doc_stride, v2):
    """The passage windows of a SQuAD training file, as the pmlm_squad task makes them."""
    from ..tasks.squad import PMLMSquadConfig, PMLMSquadTask  # fairseq: only this answer needs it

    logging.disable(logging.WARNING)  # the task's per-file notes; the training run prints them
    cfg = PMLMSquadConfig(data=data, squad_v2=v2, max_positions=max_positions, doc_stride=doc_stride)
    return len(PMLMSquadTask.setup_task(cfg).squad_features(train_json, training=True)[2])
