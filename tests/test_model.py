"""The fast attention path against the reference, the relative buckets, the LM head."""
import numpy as np
import pytest
import torch

from conftest import logits, make_dataset, random_documents, tiny_transformer
from fairseq_pmlm.modules.relative_position import relative_position_bucket


@pytest.mark.parametrize("rel_pos_buckets", [32, 0])
def test_sdpa_split_plan_equals_reference_full_plan(rel_pos_buckets, dictionary, rng):
    fast = tiny_transformer(len(dictionary), rel_pos_buckets, "sdpa")
    ref = tiny_transformer(len(dictionary), rel_pos_buckets, "reference")
    ds = make_dataset(random_documents(rng, dictionary, 30), dictionary, tokens_per_sample=64)
    for start in range(0, 24, 8):
        batch = ds.collater([ds[i] for i in range(start, start + 8)])
        keep = batch["net_input"]["kinds"] > 0
        a = logits(fast, batch)  # context block skipped (prefix_len)
        b = logits(ref, batch, prefix_len=None)  # one dense masked block
        assert torch.allclose(a[keep], b[keep], atol=1e-5)


def test_training_mode_gradients_agree_without_dropout(dictionary, rng):
    """float64, so that fp32 rounding in cancelling sums cannot hide or fake a difference."""
    fast = tiny_transformer(len(dictionary), impl="sdpa").train().double()
    ref = tiny_transformer(len(dictionary), impl="reference").train().double()
    for m in (fast, ref):
        for mod in m.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        for layer in m.layers:
            layer.attn.dropout = 0.0
    ds = make_dataset(random_documents(rng, dictionary, 10), dictionary, tokens_per_sample=64)
    ni = ds.collater([ds[i] for i in range(4)])["net_input"]
    args = (ni["src_tokens"], ni["positions"], ni["segments"], ni["kinds"], ni["steps"])
    keep = (ni["kinds"] > 0).unsqueeze(-1).double()
    w = torch.randn(*ni["kinds"].shape, 32, dtype=torch.float64)
    (fast(*args, prefix_len=ni["prefix_len"]) * keep * w).sum().backward()
    (ref(*args) * keep * w).sum().backward()
    for (n, p), q in zip(fast.named_parameters(), ref.parameters()):
        if p.grad is not None:
            assert torch.allclose(p.grad, q.grad, atol=1e-9, rtol=1e-6), n


def test_relative_buckets_hand_values_and_direction():
    rel = torch.tensor([0, 1, -1, 7, -7, 8, 12, 200, -200, 127, -127])
    got = relative_position_bucket(rel, 32, 128).tolist()
    # 16 buckets per side: 0..7 exact, 8..15 log-spaced up to 128; right side +16
    assert got[:5] == [0, 17, 1, 23, 7]
    assert got[5] == 24 and got[7] == 31 and got[8] == 15 and got[9] == 31 and got[10] == 15
    assert got[6] == 16 + 8 + int(np.log(12 / 8) / np.log(128 / 8) * 8)
    d = torch.arange(0, 400)
    right, left = relative_position_bucket(d, 32, 128), relative_position_bucket(-d, 32, 128)
    assert (right[1:] >= 16).all() and (left <= 15).all()
    assert (right.diff() >= 0).all() and (left.diff() >= 0).all()


def test_lm_head_is_tied_and_projects_only_loss_positions(dictionary, rng):
    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model

    cfg = UniLMv2Config(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_attention_heads=4)
    model = UniLMv2Model(cfg, dictionary).eval()
    t = model.transformer
    assert t.lm_head.weight is t.embed_tokens.weight
    ds = make_dataset(random_documents(rng, dictionary, 10), dictionary, tokens_per_sample=64)
    batch = ds.collater([ds[i] for i in range(4)])
    mask = batch["target"].ne(dictionary.pad())
    with torch.no_grad():
        some, _ = model(**batch["net_input"], masked_tokens=mask)
        full, _ = model(**batch["net_input"])
    assert some.shape == (int(mask.sum()), len(dictionary))
    assert torch.allclose(some, full[mask], atol=1e-6)
