"""Facts of a data directory beyond its tokenizer (``text.tokenizer_files``) and item counts
(``data.databin.writer.index_items``): the separator symbol, a SQuAD file's training windows."""
import logging

from ..data.dict_files import dict_names, dictionary_in
from ..symbols import separator_symbol


def separator_of(directory, source_lang="source"):
    """The dictionary symbol that carries the sentence separator in a data directory's dictionary
    (the one the model reads: ``data.dict_files``), or None: what the model emits between sentences."""
    path = dictionary_in(directory, source_lang)
    if path is None:
        raise ValueError(f"{directory} has no {' or '.join(dict_names(source_lang))}")
    with open(path, encoding="utf-8") as f:
        return separator_symbol([line.split(" ")[0] for line in f])


def squad_windows(data, train_json, max_positions, doc_stride, v2):
    """The passage windows of a SQuAD training file, as the pmlm_squad task makes them."""
    from ..tasks.squad import PMLMSquadConfig, PMLMSquadTask  # fairseq: only this answer needs it

    logging.disable(logging.WARNING)  # the task's per-file notes; the training run prints them
    cfg = PMLMSquadConfig(data=data, squad_v2=v2, max_positions=max_positions, doc_stride=doc_stride)
    return len(PMLMSquadTask.setup_task(cfg).squad_features(train_json, training=True)[2])
