"""Blockwise masking, corruption and layout statistics over many examples (PMLM-SPEC section 2)."""
import collections

import numpy as np
import pytest
import torch

from conftest import FakeLines, make_dataset, random_documents
from fairseq_pmlm.data.blockwise_masking import MaskingConfig, sample_blocks
from fairseq_pmlm.data.pmlm_dataset import pack_documents
from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PSEUDO
from fairseq_pmlm.tasks.pseudo_masked_lm import MASK_SYMBOL, PSEUDO_SYMBOL


def long_dataset(d, rng, objective="ae+par", n_docs=100, **masking):
    """Documents long enough that nearly every context is 512 tokens."""
    lines = random_documents(rng, d, n_docs, sents=(30, 40), words=(15, 30))
    return make_dataset(lines, d, tokens_per_sample=512, objective=objective, **masking)


def blocks_of(ex):
    """(start position, length) of every factorization step, from the appended part."""
    kinds, steps, pos = ex["kinds"], ex["steps"], ex["positions"]
    out = []
    for s in range(1, int(steps.max()) + 1):
        p = pos[(kinds == PSEUDO) & (steps == s)]
        out.append((int(p[0]), len(p)))
    return out


def reference_algorithm_1(rng, n_maskable, mask_prob=0.15, block_prob=0.4):
    """The paper's Algorithm 1 over one run of maskable tokens, written independently."""
    masked, blocks = set(), []
    while len(masked) < mask_prob * n_maskable:
        p = rng.integers(0, n_maskable)
        length = rng.integers(2, 7) if rng.random() < block_prob else 1
        span = set(range(p, p + length))
        if p + length <= n_maskable and not span & masked:
            masked |= span
            blocks.append(length)
    return blocks


@pytest.fixture(scope="module")
def stats():
    from conftest import make_dictionary

    d = make_dictionary()
    rng = np.random.default_rng(7)
    ds = long_dataset(d, rng)
    examples = [ds[i] for i in range(min(len(ds), 200))]
    return d, ds, examples


def test_mask_ratio_is_15_percent_of_maskable_tokens(stats):
    d, ds, examples = stats
    masked = sum(int(((e["kinds"] == CONTEXT) & e["target"].ne(d.pad())).sum()) for e in examples)
    maskable = sum(int((e["kinds"] == CONTEXT).sum()) - 3 for e in examples)
    assert abs(masked / maskable - 0.15) < 0.01


def test_blocks_do_not_overlap_and_never_cover_special_tokens(stats):
    d, ds, examples = stats
    specials = {d.bos(), d.eos()}
    for e in examples:
        ctx_len = int((e["kinds"] == CONTEXT).sum())
        covered = np.zeros(ctx_len, dtype=int)
        for p, length in blocks_of(e):
            assert 1 <= length <= 6
            covered[p : p + length] += 1
        assert covered.max() <= 1
        seg = e["segments"][:ctx_len]
        special_pos = [0, int((seg == 0).sum()) - 1, ctx_len - 1]
        assert covered[special_pos].sum() == 0
        originals = e["tokens"][e["kinds"] == ORIGINAL]
        assert not any(int(t) in specials for t in originals)


def test_block_length_distribution_matches_algorithm_1(stats):
    d, ds, examples = stats
    ours = collections.Counter(length for e in examples for _, length in blocks_of(e))
    rng = np.random.default_rng(0)
    ref = collections.Counter(l for _ in range(len(examples)) for l in reference_algorithm_1(rng, 509))
    n_ours, n_ref = sum(ours.values()), sum(ref.values())
    for length in range(1, 7):
        assert abs(ours[length] / n_ours - ref[length] / n_ref) < 0.03, length
    ngrams = [ours[l] for l in range(2, 7)]
    assert 0.25 < sum(ngrams) / n_ours < 0.45  # 40% proposed, fewer accepted (rejection)
    masked_in_ngrams = sum(l * ours[l] for l in range(2, 7)) / sum(l * c for l, c in ours.items())
    assert masked_in_ngrams > 0.6  # most masked tokens sit in n-gram blocks


def test_corruption_is_80_10_10_and_random_tokens_are_normal_symbols(stats):
    d, ds, examples = stats
    mask_idx, p_idx = d.index(MASK_SYMBOL), d.index(PSEUDO_SYMBOL)
    n = n_mask = n_keep = n_rand = 0
    for e in examples:
        sel = (e["kinds"] == CONTEXT) & e["target"].ne(d.pad())
        shown, orig = e["tokens"][sel], e["target"][sel]
        n += len(shown)
        n_mask += int((shown == mask_idx).sum())
        keep = shown == orig
        n_keep += int(keep.sum())
        rand = (shown != mask_idx) & ~keep
        n_rand += int(rand.sum())
        assert all(int(t) >= d.nspecial and int(t) not in (mask_idx, p_idx) for t in shown[rand])
    # a random draw equal to the original counts as kept (1/100 of 10%)
    assert n > 10000
    assert abs(n_mask / n - 0.8) < 0.02 and abs(n_rand / n - 0.1) < 0.02 and abs(n_keep / n - 0.1) < 0.02


def test_appended_part_mirrors_its_context_positions(stats):
    d, ds, examples = stats
    p_idx = d.index(PSEUDO_SYMBOL)
    for e in examples[:40]:
        ctx = e["kinds"] == CONTEXT
        orig_ctx = torch.where(e["target"].ne(d.pad()) & ctx, e["target"], e["tokens"])
        for s in range(1, int(e["steps"].max()) + 1):
            ps = (e["kinds"] == PSEUDO) & (e["steps"] == s)
            os_ = (e["kinds"] == ORIGINAL) & (e["steps"] == s)
            assert ps.nonzero().max() < os_.nonzero().min()  # [P]s before the originals
            pos = e["positions"][ps]
            assert torch.equal(pos, e["positions"][os_])
            assert torch.equal(e["segments"][ps], e["segments"][pos])
            assert (e["tokens"][ps] == p_idx).all()
            assert torch.equal(e["tokens"][os_], orig_ctx[pos])  # copies of the originals
            assert torch.equal(e["target"][ps], orig_ctx[pos])  # [P] predicts them


def test_context_is_sos_s1_eos_s2_eos_with_segments(stats):
    d, ds, examples = stats
    for e in examples[:40]:
        ctx = e["kinds"] == CONTEXT
        seg = e["segments"][ctx]
        orig = torch.where(e["target"][ctx].ne(d.pad()), e["target"][ctx], e["tokens"][ctx])
        n1 = int((seg == 0).sum())
        assert orig[0] == d.bos() and orig[n1 - 1] == d.eos() and orig[-1] == d.eos()
        assert (seg[:n1] == 0).all() and (seg[n1:] == 1).all() and len(seg) - n1 >= 2
        assert torch.equal(e["positions"][ctx], torch.arange(int(ctx.sum())))


@pytest.mark.parametrize("objective", ["ar", "ae+ar"])
def test_ar_objectives_use_single_token_steps(objective, dictionary):
    ds = long_dataset(dictionary, np.random.default_rng(3), objective=objective, n_docs=4)
    for i in range(len(ds)):
        assert all(length == 1 for _, length in blocks_of(ds[i]))


def test_ae_has_no_appended_part_and_par_has_no_ae_targets(dictionary):
    rng = np.random.default_rng(4)
    ae = long_dataset(dictionary, rng, objective="ae", n_docs=3)
    par = long_dataset(dictionary, rng, objective="par", n_docs=3)
    for i in range(len(ae)):
        assert (ae[i]["kinds"] == CONTEXT).all() and ae[i]["target"].ne(dictionary.pad()).any()
    for i in range(len(par)):
        e = par[i]
        assert not (e["target"].ne(dictionary.pad()) & (e["kinds"] == CONTEXT)).any()
        assert (e["kinds"] == PSEUDO).any()


def test_examples_are_a_function_of_seed_epoch_and_index(dictionary):
    rng = np.random.default_rng(5)
    lines = random_documents(rng, dictionary, 20)
    a, b = make_dataset(lines, dictionary), make_dataset(lines, dictionary)
    for i in (0, 3, 7):
        assert all(torch.equal(a[i][k], b[i][k]) for k in ("tokens", "positions", "target"))
    before = [a[i]["tokens"] for i in range(len(a))]
    a.set_epoch(2)
    changed = sum(not torch.equal(x, a[i]["tokens"]) for i, x in enumerate(before))
    assert changed > 0.8 * len(a)
    c = make_dataset(lines, dictionary, seed=2)
    assert sum(not torch.equal(x, c[i]["tokens"]) for i, x in enumerate(before)) > 0.8 * len(a)


def test_pack_documents_skips_short_documents_splits_long_sentences_and_keeps_documents_apart():
    sizes = [4, 3, 1, 2, 1, 20, 1, 5, 5, 5, 1]  # sizes include the EOS; 1 = blank line
    pieces, offsets, stats = pack_documents(sizes, max_tokens=8)
    assert stats == {"documents": 4, "short_documents": 1, "long_sentences": 1}
    chunks = [pieces[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    assert chunks[0] == [[0, 0, 3], [1, 0, 2]]  # doc 1: two sentences in one chunk
    assert [c for c in chunks if c[0][0] == 5] == [[[5, 0, 8]], [[5, 8, 16]], [[5, 16, 19]]]
    assert chunks[-2:] == [[[7, 0, 4], [8, 0, 4]], [[9, 0, 4]]]  # greedy, never across documents
    for c in chunks:
        assert sum(e - s for _, s, e in c) <= 8
