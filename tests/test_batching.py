"""Every example is batched exactly once, also when the last batch is not a multiple of
--required-batch-size-multiple (this fairseq build drops such a batch; runtime/complete_batches.py
gives it back, for fairseq's datasets too); the compact per-example arrays order and batch as int64
ones did."""
import numpy as np
import pytest
import torch

from fairseq_pmlm.runtime import complete_batches

from helpers import make_dataset, random_documents


def test_the_plugin_installs_complete_batching_in_fairseq():
    from fairseq.data import data_utils

    assert data_utils.batch_by_size is complete_batches.batch_by_size
    # what it replaces: fairseq's drops the 2 examples of a last batch under a multiple of 8
    batches = complete_batches.FAIRSEQ_BATCH_BY_SIZE(np.arange(18), lambda i: 10, max_sentences=8,
                                                     required_batch_size_multiple=8)
    assert [len(b) for b in batches] == [8, 8]


@pytest.mark.parametrize("kind", ["fairseq's sentence_prediction data", "the plugin's SQuAD windows"])
def test_fairseqs_own_datasets_and_the_squad_windows_batch_every_example(kind, dictionary):
    """RoBERTa's GLUE command (--required-batch-size-multiple 8 by default) scored 16 of 18 dev
    rows in fairseq-validate; pmlm_squad fine-tuned and scored on all windows but up to 7."""
    from fairseq.data import IdDataset, ListDataset, NestedDictionaryDataset, RightPadDataset

    from fairseq_pmlm.data.squad_dataset import SquadDataset
    from fairseq_pmlm.data.squad_features import SquadFeature

    rows = [torch.tensor([dictionary.bos()] + [dictionary.nspecial] * (3 + i % 5) + [dictionary.eos()])
            for i in range(18)]
    sizes = np.array([len(r) for r in rows])
    if kind.startswith("fairseq"):
        src = ListDataset(rows, sizes)
        ds = NestedDictionaryDataset({"id": IdDataset(), "net_input": {"src_tokens": RightPadDataset(
            src, pad_idx=dictionary.pad())}}, sizes=[sizes])
    else:
        ds = SquadDataset([SquadFeature(0, r.tolist(), 2, 0, len(r) - 3, [True] * (len(r) - 3)) for r in rows],
                          dictionary, shuffle=False)
    batches = ds.batch_by_size(np.arange(18), max_tokens=None, max_sentences=8, required_batch_size_multiple=8)
    assert sorted(np.concatenate(batches).tolist()) == list(range(18))


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

    batches = complete_batches.FAIRSEQ_BATCH_BY_SIZE(order, ds.num_tokens, num_tokens_vec=num_tokens, max_sentences=16,
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
