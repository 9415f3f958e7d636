"""No leakage, by perturbation of a randomly initialised model in fp32 (PMLM-SPEC section 2).

Changing the original token of block i (in the raw text, so in the context, where masking
hides it, and in its appended copy) must leave every AE logit and the PAR logits of blocks
<= i unchanged, and must change PAR logits of later blocks.
"""
import numpy as np
import pytest
import torch

from conftest import logits, make_dataset, random_documents, tiny_transformer
from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PSEUDO

ATOL = 1e-5


def one_document_dataset(doc, d, seed, **masking):
    return make_dataset([doc, []], d, tokens_per_sample=64, seed=seed, **masking)


@pytest.mark.parametrize("rel_pos_buckets,impl", [(32, "sdpa"), (32, "reference"), (0, "sdpa")])
def test_changing_block_i_changes_only_later_par_predictions(rel_pos_buckets, impl, dictionary, rng):
    model = tiny_transformer(len(dictionary), rel_pos_buckets, impl)
    checked_later = 0
    for trial in range(30):
        doc = rng.integers(dictionary.nspecial, dictionary.nspecial + 100, size=rng.integers(20, 55)).tolist()
        # all-[MASK] corruption: the context shows nothing of the masked originals
        ds = one_document_dataset(doc, dictionary, trial, random_token_prob=0.0, leave_unmasked_prob=0.0)
        ex = ds[0]
        kinds, steps, pos = ex["kinds"], ex["steps"], ex["positions"]
        n_steps = int(steps.max())
        i = int(rng.integers(1, n_steps + 1))
        block_pos = pos[(kinds == ORIGINAL) & (steps == i)]
        # the same text with block i's original tokens changed: same masks (same seed/index)
        doc2 = list(doc)
        # context = [SOS] S1 [EOS] S2 [EOS]: map context positions back to the document
        s1_len = int((ex["segments"][kinds == CONTEXT] == 0).sum()) - 2
        for p in block_pos.tolist():
            j = p - 1 if p <= s1_len else p - 2
            doc2[j] = dictionary.nspecial + (doc2[j] - dictionary.nspecial + 1 + int(rng.integers(98))) % 100
        ex2 = one_document_dataset(doc2, dictionary, trial, random_token_prob=0.0, leave_unmasked_prob=0.0)[0]
        assert torch.equal(ex["tokens"][kinds == CONTEXT], ex2["tokens"][kinds == CONTEXT])
        assert not torch.equal(ex["tokens"], ex2["tokens"])

        a = logits(model, ds.collater([ex]))[0]
        b = logits(model, ds.collater([ex2]))[0]
        ae = ex["target"].ne(dictionary.pad()) & (kinds == CONTEXT)
        assert torch.allclose(a[ae], b[ae], atol=ATOL), "AE logits changed"
        early = (kinds == PSEUDO) & (steps <= i)
        assert torch.allclose(a[early], b[early], atol=ATOL), "PAR logits of blocks <= i changed"
        later = (kinds == PSEUDO) & (steps > i)
        if later.any():
            assert not torch.allclose(a[later], b[later], atol=ATOL), "later blocks ignore block i"
            checked_later += 1
    assert checked_later >= 10


def test_appended_copies_are_invisible_to_ae_and_earlier_steps_with_80_10_10(dictionary, rng):
    model = tiny_transformer(len(dictionary))
    ds = make_dataset(random_documents(rng, dictionary, 30), dictionary, tokens_per_sample=64)
    for index in range(20):
        ex = ds[index]
        kinds, steps = ex["kinds"], ex["steps"]
        i = int(rng.integers(1, int(steps.max()) + 1))
        ex2 = dict(ex, tokens=ex["tokens"].clone())
        sel = (kinds == ORIGINAL) & (steps == i)
        ex2["tokens"][sel] = torch.from_numpy(rng.integers(dictionary.nspecial, dictionary.nspecial + 100, int(sel.sum())))
        a, b = logits(model, ds.collater([ex]))[0], logits(model, ds.collater([ex2]))[0]
        keep = (kinds == CONTEXT) | ((kinds == PSEUDO) & (steps <= i))
        assert torch.allclose(a[keep], b[keep], atol=ATOL)


def test_padding_changes_no_logit(dictionary, rng):
    model = tiny_transformer(len(dictionary))
    ds = make_dataset(random_documents(rng, dictionary, 30), dictionary, tokens_per_sample=64)
    for start in range(0, 20, 4):
        batch = ds.collater([ds[i] for i in range(start, start + 4)])
        ref = logits(model, batch)
        ni = batch["net_input"]
        pad = ni["kinds"].eq(0)
        # other token ids at padding, and extra padding columns at the end
        noisy = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in ni.items()}
        noisy["src_tokens"][pad] = torch.randint(4, 100, (int(pad.sum()),))
        noisy["positions"][pad] = torch.randint(0, 60, (int(pad.sum()),))
        for key in ("src_tokens", "positions", "segments", "kinds", "steps"):
            extra = torch.randint(4, 50, (noisy[key].size(0), 5)) if key in ("src_tokens", "positions") else torch.zeros(noisy[key].size(0), 5, dtype=torch.long)
            noisy[key] = torch.cat([noisy[key], extra], dim=1)
        out = logits(model, {"net_input": noisy})
        keep = ~pad
        assert torch.allclose(ref[keep], out[:, : ref.size(1)][keep], atol=ATOL)
        # a single example alone gives the same logits as inside the padded batch
        for b in range(4):
            alone = logits(model, ds.collater([ds[start + b]]))[0]
            row = ref[b][keep[b]]
            assert torch.allclose(alone, row, atol=ATOL)
