"""fairseq's batching, keeping every example.

This fairseq build's ``data_utils.batch_by_size`` drops its last batch when that batch's size is not
a multiple of ``--required-batch-size-multiple`` (default 8): up to 7 examples lost every training
and validation epoch, sentences silently missing from ``fairseq-generate`` (and so from its scores),
GLUE dev rows missing from ``fairseq-validate``'s accuracy. Here that batch is given back, for every
dataset (the plugin's and fairseq's own); fixed batch shapes (TPU) stay fairseq's choice.
"""
import numpy as np
from fairseq.data import data_utils

FAIRSEQ_BATCH_BY_SIZE = data_utils.batch_by_size


def batch_by_size(indices, num_tokens_fn, num_tokens_vec=None, max_tokens=None, max_sentences=None,
                  required_batch_size_multiple=1, fixed_shapes=None):
    if not isinstance(indices, np.ndarray):  # (an iterable is read once)
        indices = np.fromiter(indices, dtype=np.int64, count=-1)
    batches = FAIRSEQ_BATCH_BY_SIZE(indices, num_tokens_fn, num_tokens_vec=num_tokens_vec, max_tokens=max_tokens,
                                    max_sentences=max_sentences,
                                    required_batch_size_multiple=required_batch_size_multiple,
                                    fixed_shapes=fixed_shapes)
    if fixed_shapes is not None or not len(indices):
        return batches
    # a flag per index, not np.isin (which sorts copies of both arrays: ~50 bytes an example)
    batched = np.zeros(int(indices.max()) + 1, dtype=bool)
    if len(batches):
        batched[np.concatenate(batches)] = True
    missing = indices[~batched[indices]]
    return list(batches) + [missing] if len(missing) else batches


data_utils.batch_by_size = batch_by_size
