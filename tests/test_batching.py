"""Every example is batched exactly once, also when the last batch is not a multiple of
--required-batch-size-multiple (this fairseq build drops such a batch; see complete_batches.py)."""
import numpy as np
import pytest

from helpers import make_dataset, random_documents


@pytest.mark.parametrize("multiple", [1, 8])
def test_every_example_lands_in_exactly_one_batch(dictionary, rng, multiple):
    ds = make_dataset(random_documents(rng, dictionary, 61), dictionary, tokens_per_sample=64)
    indices = ds.ordered_indices()
    batches = ds.batch_by_size(indices, max_tokens=None, max_sentences=16, required_batch_size_multiple=multiple)
    got = np.concatenate(batches)
    assert len(indices) % 16 % 8 != 0  # the case fairseq gets wrong
    assert sorted(got.tolist()) == sorted(indices.tolist())
