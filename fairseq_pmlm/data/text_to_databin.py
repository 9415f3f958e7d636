"""The data-bin engine's former single module, kept so that ``from fairseq_pmlm.data import
text_to_databin`` (and ``python -m fairseq_pmlm.data.text_to_databin``) keep working: the engine is
the package ``data/databin/`` (one module a stage: reading, workers, dictionary, writer, prepare,
corpus, pairs, cli; the tokenisers are ``text/token_ids.py``). These are re-exports: patch a
tunable (``PART_BYTES``, ``MIN_PART_BYTES``, ``BATCH_LINES``) in ``data/databin/reading.py``, where it
is read, not here."""
import sys

from ..text.token_ids import SentencePieceIds, WordPieceIds, encode_sentences, lookup_table, make_tokenizer
from .databin import PrepareError
from .databin.cli import main
from .databin.corpus import prepare_corpus, train_sentencepiece
from .databin.dictionary import check_dict_is_vocab_cut, dictionary_from_counts, load_dictionary, load_dictionary_text
from .databin.pairs import prepare_pairs
from .databin.prepare import Preparer, open_output
from .databin.reading import count_lines, line_number, next_document_start, part_offsets, read_lines, shard_plan
from .databin.workers import Workers, encode_part, part_dtype
from .databin.writer import write_databin, write_index, write_tokenizer_files

__all__ = [
    "PrepareError", "main", "prepare_corpus", "prepare_pairs", "Preparer", "open_output", "train_sentencepiece",
    "line_number", "read_lines", "count_lines", "part_offsets", "next_document_start", "shard_plan",
    "encode_sentences", "SentencePieceIds", "WordPieceIds", "make_tokenizer", "lookup_table",
    "Workers", "encode_part", "part_dtype", "dictionary_from_counts", "load_dictionary", "load_dictionary_text",
    "check_dict_is_vocab_cut", "write_databin", "write_index", "write_tokenizer_files",
]

if __name__ == "__main__":
    sys.exit(main())
