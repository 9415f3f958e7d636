"""The plugin's dictionary: a data directory's ``dict.txt`` with ``[MASK]`` and ``[P]`` appended,
as every task, converter and exporter reads it."""
import logging
import os

from fairseq import utils
from fairseq.data import Dictionary

from ..errors import InputNotFound
from ..symbols import MASK_SYMBOL, PSEUDO_SYMBOL

logger = logging.getLogger(__name__)


def load_pmlm_dictionary(data, names=("dict.txt",)):
    """The first data directory's dictionary (first of ``names`` found), plus [MASK] and [P]."""
    paths = utils.split_paths(data)
    if not paths or not os.path.isdir(paths[0]):
        raise InputNotFound(f"data directory not found: {data!r} (run scripts/prepare_data.sh)")
    found = [os.path.join(paths[0], n) for n in names if os.path.isfile(os.path.join(paths[0], n))]
    if not found:
        raise InputNotFound(f"dictionary not found: {os.path.join(paths[0], names[0])}")
    dictionary = Dictionary.load(found[0])
    dictionary.add_symbol(MASK_SYMBOL)
    dictionary.add_symbol(PSEUDO_SYMBOL)
    logger.info(f"dictionary: {len(dictionary)} types (with {MASK_SYMBOL} and {PSEUDO_SYMBOL})")
    return dictionary
