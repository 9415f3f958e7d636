"""Every example is batched exactly once, also when the last batch is not a multiple of
--required-batch-size-multiple (this fairseq build drops such a batch; see complete_batches.py);
the compact per-example arrays order and batch as int64 ones did."""
import numpy as np
import pytest
import torch

from helpers import make_dataset, random_documents


@pytest.mark.parametrize("multiple", [1, 8])
def test_every_example_lands_in_exactly_one_batch(dictionary, rng, multiple):
    ds = make_dataset(random_documents(rng, dictionary, 61), dictionary, tokens_per_sample=64)
    indices = ds.ordered_indices()
    batches = ds.batch_by_size(indices, max_tokens=None, max_sentences=16, required_batch_size_multiple=multiple)
    got = np.concatenate(batches)
    assert len(indices) % 16 % 8 != 0  # the case fairseq gets wrong
    assert sorted(got.tolist()) == sorted(indices.tolist())


def test_compact_index_gives_the_examples_order_and_batches_of_int64_arrays(dictionary, rng):
    """The index's int32 arrays, the num_tokens table and the flag-based completion give what
    int64 arrays per example, np.isin and a sort on int64 keys gave."""
    from fairseq.data import data_utils

    ds = make_dataset(random_documents(rng, dictionary, 300), dictionary, tokens_per_sample=64)
    wide = type(ds.index)(*(np.asarray(v, dtype=np.int64) if isinstance(v, np.ndarray) else v for v in ds.index))
    body = wide.lengths
    num_tokens = body + 3 + (2 * np.ceil(ds.masking.mask_prob * body) + 6).astype(np.int64) * ds.objective.par
    assert ds.sizes.tolist() == (body + 3).tolist()
    assert ds.num_tokens_vec(np.arange(len(ds))).tolist() == num_tokens.tolist()
    assert [ds.num_tokens(i) for i in range(len(ds))] == num_tokens.tolist()

    with data_utils.numpy_seed(ds.seed):
        shuffle = np.random.permutation(len(ds))
    order = shuffle[np.argsort(num_tokens[shuffle], kind="mergesort")]
    assert ds.ordered_indices().tolist() == order.tolist()

    batches = data_utils.batch_by_size(order, ds.num_tokens, num_tokens_vec=num_tokens, max_sentences=16,
                                       required_batch_size_multiple=8)
    missing = order[~np.isin(order, np.concatenate(batches))]
    expected = [b.tolist() for b in batches] + ([missing.tolist()] if len(missing) else [])
    got = ds.batch_by_size(order, max_tokens=None, max_sentences=16, required_batch_size_multiple=8)
    assert [b.tolist() for b in got] == expected

    compact = [(ds.chunk_pieces(i), ds[i]) for i in range(len(ds))]
    ds.index = wide
    for i, (pieces, ex) in enumerate(compact):
        assert pieces == ds.chunk_pieces(i)
        other = ds[i]
        assert ex.keys() == other.keys() and all(torch.equal(ex[k], other[k]) for k in ex if k != "id")
