"""No information leaks, shown by perturbation on a randomly initialised model in fp32, eval mode
(docs/DESIGN.md §1, §3).

If the original tokens of block i change (in the source text, so in the context, where
all-[MASK] corruption hides them, and in block i's appended copies), then no AE prediction
(masked context position) and no PAR prediction ([P]) of steps <= i may change; PAR predictions
of later steps must change (they are allowed to see block i). Random examples, fixed seeds.
"""
import numpy as np
import pytest
import torch

from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PAD, PSEUDO

from helpers import collate, example, logits, random_context, tiny_transformer, words

pytestmark = pytest.mark.usefixtures("one_thread")

ATOL = 1e-5  # "unchanged"; fp32 differences of a real dependence are orders of magnitude larger
ALL_MASK = dict(random_token_prob=0.0, leave_unmasked_prob=0.0)


def other_words(rng, d, tokens):
    """A different normal word for each of ``tokens``."""
    base = d.nspecial
    return base + (np.asarray(tokens) - base + 1 + rng.integers(0, 99, size=len(tokens))) % 100


def max_diff(a, b):
    return float((a - b).abs().max()) if a.numel() else 0.0


def random_case(rng, d, lengths=(3, 45), **masking):
    ctx, seg, maskable = random_context(rng, d, int(rng.integers(*lengths)), int(rng.integers(*lengths)))
    seed = int(rng.integers(1 << 30))
    return seed, ctx, seg, maskable, example(seed, ctx, seg, maskable, d, "ae+par", **masking)


CONFIGS = {  # attention path, relative bias buckets (None: no bias), use the collated prefix_len (split plan)
    "sdpa-relpos-split": ("sdpa", 32, "batch"),
    "sdpa-relpos-dense": ("sdpa", 32, None),
    "reference-relpos": ("reference", 32, "batch"),
    "sdpa-no-relpos": ("sdpa", None, "batch"),
    "reference-no-relpos-dense": ("reference", None, None),
}
# The opt-in flex path is not here: its mask and bias are the SDPA plan's, value for value, and its
# compiled forward gives the SDPA path's hidden states on padded batches (test_flex_attention.py);
# here it would only re-test the kernel, at ~25 s of CPU compiling on a fresh machine.


@pytest.mark.parametrize("config", list(CONFIGS))
def test_changing_the_originals_of_block_i_changes_no_ae_or_par_logit_up_to_step_i_but_changes_later_par_logits(
        config, dictionary):
    impl, buckets, prefix = CONFIGS[config]
    model = tiny_transformer(len(dictionary), buckets, impl)
    rng = np.random.default_rng(100 + list(CONFIGS).index(config))
    n_later = 0
    for trial in range(40):
        seed, ctx, seg, maskable, ex = random_case(rng, dictionary, **ALL_MASK)
        kinds, steps, pos = ex["kinds"], ex["steps"], ex["positions"]
        n_steps = int(steps.max())
        # the first and the last step each get their turn; otherwise a random one
        i = {0: 1, 1: n_steps}.get(trial % 5, int(rng.integers(1, n_steps + 1)))
        block = pos[(kinds == ORIGINAL) & (steps == i)].numpy()
        ctx2 = ctx.copy()
        ctx2[block] = other_words(rng, dictionary, ctx[block])
        ex2 = example(seed, ctx2, seg, maskable, dictionary, "ae+par", **ALL_MASK)  # same seed: same masks
        # the premise: identical layout and corrupted context; only block i's copies differ
        for key in ("positions", "segments", "kinds", "steps"):
            assert torch.equal(ex[key], ex2[key])
        changed = ex["tokens"] != ex2["tokens"]
        assert torch.equal(changed, (kinds == ORIGINAL) & (steps == i))

        out = logits(model, collate([ex, ex2], dictionary)["net_input"], prefix)
        a, b = out[0, : len(kinds)], out[1, : len(kinds)]
        ae = (kinds == CONTEXT) & ex["target"].ne(dictionary.pad())
        assert ae.any()
        assert max_diff(a[ae], b[ae]) < ATOL, "an AE logit saw block i's original tokens"
        ctx_rows = kinds == CONTEXT
        assert max_diff(a[ctx_rows], b[ctx_rows]) < ATOL, "a context token saw an appended original"
        earlier_originals = (kinds == ORIGINAL) & (steps < i)
        assert max_diff(a[earlier_originals], b[earlier_originals]) < ATOL
        for s in range(1, n_steps + 1):
            par = (kinds == PSEUDO) & (steps == s)
            d = max_diff(a[par], b[par])
            if s <= i:
                assert d < ATOL, f"PAR logits of step {s} <= {i} saw block {i}'s originals"
            else:  # a later step is allowed to see block i, and a random model does use it
                assert d > ATOL, f"PAR logits of step {s} > {i} ignore block {i} ({d:.2e})"
                n_later += 1
    assert n_later >= 40  # many (step i, later step) pairs were checked


def test_with_80_10_10_corruption_the_appended_copies_of_step_i_are_invisible_to_ae_and_to_par_of_steps_up_to_i(
        dictionary):
    """Default corruption: the context may show random or kept tokens, so perturb only the
    appended original copies of step i (the context stays as it is)."""
    model = tiny_transformer(len(dictionary))
    rng = np.random.default_rng(7)
    n_kept_or_random = 0
    for _ in range(30):
        _, ctx, _, _, ex = random_case(rng, dictionary)
        kinds, steps = ex["kinds"], ex["steps"]
        ae = (kinds == CONTEXT) & ex["target"].ne(dictionary.pad())
        n_kept_or_random += int((ex["tokens"][ae] != dictionary.index("[MASK]")).sum())
        i = int(rng.integers(1, int(steps.max()) + 1))
        sel = (kinds == ORIGINAL) & (steps == i)
        ex2 = dict(ex, tokens=ex["tokens"].clone())
        ex2["tokens"][sel] = torch.from_numpy(other_words(rng, dictionary, ex["tokens"][sel].numpy()))
        out = logits(model, collate([ex, ex2], dictionary)["net_input"])
        a, b = out[0, : len(kinds)], out[1, : len(kinds)]
        assert max_diff(a[kinds == CONTEXT], b[kinds == CONTEXT]) < ATOL  # AE rows among them
        early = (kinds == PSEUDO) & (steps <= i)
        assert max_diff(a[early], b[early]) < ATOL
        earlier_originals = (kinds == ORIGINAL) & (steps < i)
        assert max_diff(a[earlier_originals], b[earlier_originals]) < ATOL
        later = (kinds == PSEUDO) & (steps > i)
        if later.any():
            assert max_diff(a[later], b[later]) > ATOL
    assert n_kept_or_random > 20  # the 10% random / 10% kept cases were present


def test_pseudo_tokens_of_step_i_are_seen_by_no_token_outside_step_i(dictionary):
    """Replacing the [P] token ids of step i changes only the outputs at step i's [P]s."""
    model = tiny_transformer(len(dictionary))
    rng = np.random.default_rng(8)
    for _ in range(20):
        _, _, _, _, ex = random_case(rng, dictionary)
        kinds, steps = ex["kinds"], ex["steps"]
        i = int(rng.integers(1, int(steps.max()) + 1))
        sel = (kinds == PSEUDO) & (steps == i)
        ex2 = dict(ex, tokens=ex["tokens"].clone())
        ex2["tokens"][sel] = torch.from_numpy(rng.choice(words(dictionary), int(sel.sum())))
        out = logits(model, collate([ex, ex2], dictionary)["net_input"])
        a, b = out[0, : len(kinds)], out[1, : len(kinds)]
        assert max_diff(a[~sel], b[~sel]) < ATOL
        assert max_diff(a[sel], b[sel]) > ATOL  # control: the change is visible where allowed


def padded_variants(rng, ni, extra_end=5, extra_prefix=3):
    """The same batch with (1) random ids/positions/segments/steps at every padding column and
    (2) in addition, extra padding columns at the end and between the contexts and the
    appended parts (prefix_len widened). Returns (net_input, column map to the original)."""
    pad = ni["kinds"] == PAD
    noisy = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in ni.items()}
    n = int(pad.sum())
    noisy["src_tokens"][pad] = torch.from_numpy(rng.integers(0, 106, n))
    noisy["positions"][pad] = torch.from_numpy(rng.integers(0, 200, n))
    noisy["segments"][pad] = torch.from_numpy(rng.integers(0, 2, n))
    noisy["steps"][pad] = torch.from_numpy(rng.integers(0, 9, n))
    yield noisy, torch.arange(pad.size(1))

    B, p = pad.size(0), ni["prefix_len"]
    wide = {}
    for key, hi in (("src_tokens", 106), ("positions", 200), ("segments", 2), ("steps", 9), ("kinds", 1)):
        v = noisy[key]
        mid = torch.from_numpy(rng.integers(0, hi, (B, extra_prefix)))
        end = torch.from_numpy(rng.integers(0, hi, (B, extra_end)))
        wide[key] = torch.cat([v[:, :p], mid, v[:, p:], end], dim=1)
    wide["prefix_len"] = p + extra_prefix
    cols = torch.cat([torch.arange(p), torch.arange(p + extra_prefix, pad.size(1) + extra_prefix)])
    yield wide, cols


@pytest.mark.parametrize("config", ["sdpa-relpos-split", "sdpa-relpos-dense", "reference-relpos", "sdpa-no-relpos"])
def test_padding_ids_and_extra_padding_columns_change_no_logit_of_a_real_token(config, dictionary):
    impl, buckets, prefix = CONFIGS[config]
    model = tiny_transformer(len(dictionary), buckets, impl)
    rng = np.random.default_rng(9)
    checked = 0
    for _ in range(100):  # until 6 pairs where each row is padded somewhere
        if checked == 6:
            break
        # a short context with many masks and a long one with few: each row is padded somewhere
        *_, short = random_case(rng, dictionary, (8, 16), mask_prob=0.6)
        *_, long = random_case(rng, dictionary, (30, 45), mask_prob=0.15)
        n_ctx = [int((e["kinds"] == CONTEXT).sum()) for e in (short, long)]
        n_app = [len(e["kinds"]) - n for e, n in zip((short, long), n_ctx)]
        if not (n_ctx[0] < n_ctx[1] and n_app[0] > n_app[1]):
            continue
        alone = [logits(model, collate([e], dictionary)["net_input"], prefix)[0] for e in (short, long)]
        ni = collate([short, long], dictionary)["net_input"]
        real = ni["kinds"] != PAD
        assert (~real).any(dim=1).all(), "both rows padded: the contexts and the appended parts differ"
        ref = logits(model, ni, prefix)
        for b in range(2):  # batching with padding = the example alone
            assert max_diff(ref[b][real[b]], alone[b]) < ATOL
        for variant, cols in padded_variants(rng, ni):
            out = logits(model, variant, prefix)[:, cols]
            assert variant["src_tokens"].size(1) >= ref.size(1)
            assert max_diff(out[real], ref[real]) < ATOL
        checked += 1
    assert checked == 6
