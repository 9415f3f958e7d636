"""Blockwise masking (Algorithm 1), corruption and the example layout, measured over many
examples of the real ``PseudoMaskedLMDataset`` (docs/DESIGN.md §3), plus ``pack_documents``.

Contexts are ~500 tokens (tokens_per_sample=512). The masked positions and the factorization
order are read back from the appended part ([P] positions per step); the uncorrupted context is
rebuilt from the raw lines, independently of the example's targets.
"""
import collections
import random

import numpy as np
import pytest
import torch

from fairseq_pmlm.data.blockwise_masking import MaskingConfig, sample_blocks
from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PSEUDO
from fairseq_pmlm.symbols import MASK_SYMBOL, PSEUDO_SYMBOL

from helpers import N_WORDS, make_dataset, make_dictionary, special_ids, words
from pack_reference import pack_documents

N_EXAMPLES = 180


def long_documents(rng, d, n_docs, sents=(40, 60)):
    """Documents of ~1,100 tokens (sentences of 15-30 words), a blank line after each."""
    lines = []
    for _ in range(n_docs):
        for _ in range(int(rng.integers(*sents))):
            lines.append(rng.integers(d.nspecial, d.nspecial + N_WORDS, size=int(rng.integers(15, 31))).tolist())
        lines.append([])
    return lines


def long_dataset(d, seed, objective="ae+par", n_docs=90, **masking):
    lines = long_documents(np.random.default_rng(seed), d, n_docs)
    return make_dataset(lines, d, tokens_per_sample=512, objective=objective, seed=seed, **masking)


def steps_of(ex):
    """The factorization order: per step, the context positions of its [P] tokens."""
    kinds, steps, pos = ex["kinds"], ex["steps"], ex["positions"]
    return [pos[(kinds == PSEUDO) & (steps == s)].tolist() for s in range(1, int(steps.max()) + 1)]


def raw_context(ds, index, ex, d):
    """``[SOS] S1 [EOS] S2 [EOS]`` rebuilt from the raw lines (no corruption)."""
    body = np.concatenate(ds.sentences(index))
    ctx = ex["kinds"] == CONTEXT
    n1 = int((ex["segments"][ctx] == 0).sum()) - 2
    return torch.tensor([d.bos(), *body[:n1], d.eos(), *body[n1:], d.eos()], dtype=torch.long)


def special_positions(ex):
    ctx = ex["kinds"] == CONTEXT
    n, n1 = int(ctx.sum()), int((ex["segments"][ctx] == 0).sum()) - 2
    return [0, n1 + 1, n - 1]


@pytest.fixture(scope="module")
def d():
    return make_dictionary()


@pytest.fixture(scope="module")
def corpus(d):
    ds = long_dataset(d, seed=7)
    assert len(ds) >= N_EXAMPLES
    examples = [ds[i] for i in range(N_EXAMPLES)]
    return ds, examples


def test_contexts_are_about_500_tokens(corpus):
    _, examples = corpus
    lengths = np.array([int((e["kinds"] == CONTEXT).sum()) for e in examples])
    assert lengths.max() <= 512 and np.median(lengths) >= 480


def test_masked_ratio_is_15_percent_of_the_maskable_context_tokens(corpus, d):
    _, examples = corpus
    masked = maskable = 0
    for e in examples:
        n_ctx = int((e["kinds"] == CONTEXT).sum())
        m = sum(len(b) for b in steps_of(e))
        # the AE targets sit exactly at the blocks' positions
        ae = (e["target"] != d.pad()) & (e["kinds"] == CONTEXT)
        assert sorted(ae.nonzero().flatten().tolist()) == sorted(p for b in steps_of(e) for p in b)
        goal = 0.15 * (n_ctx - 3)
        # Algorithm 1 stops as soon as the goal is reached: the last block (<= 6) overshoots it
        assert goal <= m < goal + 6
        masked, maskable = masked + m, maskable + n_ctx - 3
    assert abs(masked / maskable - 0.15) < 0.01


def test_masking_stops_at_15_percent_of_the_maskable_tokens_not_of_the_whole_sequence():
    """The stop rule we chose (docs/DESIGN.md §3): 23 tokens, 3 of them special, give a goal of
    0.15 x 20 = 3 masked tokens; the paper's 0.15 x |x| would be 3.45, so a run that reaches
    exactly 3 would go on under the paper's rule and stops under ours."""
    maskable = np.ones(23, dtype=bool)
    maskable[[0, 11, 22]] = False
    exactly_three = 0
    for seed in range(300):
        blocks = sample_blocks(np.random.default_rng(seed), maskable, MaskingConfig())
        lengths = [length for _, length in blocks]
        assert sum(lengths[:-1]) < 3 <= sum(lengths)  # stops at the first block that reaches the goal
        exactly_three += sum(lengths) == 3
    assert exactly_three > 30


def test_random_tokens_are_drawn_from_every_ordinary_row_and_no_special_one(d):
    from fairseq_pmlm.symbols import random_token_candidates

    assert random_token_candidates(d).tolist() == words(d).tolist()
    assert not set(random_token_candidates(d).tolist()) & special_ids(d)


def test_every_block_has_1_to_6_contiguous_positions(corpus):
    _, examples = corpus
    for e in examples:
        for block in steps_of(e):
            assert 1 <= len(block) <= 6
            assert block == list(range(block[0], block[0] + len(block)))


def test_blocks_never_overlap_and_never_cover_sos_or_eos(corpus, d):
    ds, examples = corpus
    for index, e in enumerate(examples):
        n_ctx = int((e["kinds"] == CONTEXT).sum())
        covered = np.zeros(n_ctx, dtype=int)
        for block in steps_of(e):
            covered[block] += 1
        assert covered.max() <= 1
        assert covered[special_positions(e)].sum() == 0
        raw = raw_context(ds, index, e, d)
        assert not any(int(raw[p]) in (d.bos(), d.eos()) for p in np.flatnonzero(covered))


def reference_algorithm_1(rng, maskable, ratio=0.15, ngram_prob=0.4):
    """Algorithm 1 as docs/DESIGN.md §3 states it (python's random, not numpy): uniform position,
    length 2..6 with probability 0.4 else 1, accepted only if all maskable and none masked."""
    n, masked, lengths = len(maskable), set(), []
    goal = ratio * sum(maskable)
    while len(masked) < goal:
        p = rng.randrange(n)
        length = rng.randint(2, 6) if rng.random() < ngram_prob else 1
        span = range(p, p + length)
        if p + length <= n and all(maskable[q] for q in span) and not masked.intersection(span):
            masked.update(span)
            lengths.append(length)
    return lengths


def histogram(lengths):
    c = collections.Counter(lengths)
    return np.array([c[length] for length in range(1, 7)], dtype=float) / len(lengths)


def test_block_lengths_follow_algorithm_1(corpus):
    """Rejection skews the accepted lengths, so compare with the empirical histogram of an
    independent implementation run on the same context layouts (5 draws each)."""
    _, examples = corpus
    ours = [len(b) for e in examples for b in steps_of(e)]
    rng = random.Random(0)
    ref = []
    for e in examples:
        n_ctx = int((e["kinds"] == CONTEXT).sum())
        maskable = [True] * n_ctx
        for p in special_positions(e):
            maskable[p] = False
        for _ in range(5):
            ref += reference_algorithm_1(rng, maskable)
    h, r = histogram(ours), histogram(ref)
    assert len(ours) > 5000
    # length 1 (~0.6): tolerance ~4 standard errors; each n-gram length (~0.08): ~5
    assert abs(h[0] - r[0]) < 0.025, (h, r)
    assert np.all(np.abs(h[1:] - r[1:]) < 0.015), (h, r)
    # n-grams: 40% proposed, fewer accepted; their lengths 2..6 roughly uniform
    assert 0.33 < h[1:].sum() < 0.41 and abs(h[1:].sum() - r[1:].sum()) < 0.025
    among = h[1:] / h[1:].sum()
    assert np.all(np.abs(among - 0.2) < 0.04), among


def test_factorization_order_is_random_not_left_to_right(corpus):
    _, examples = corpus
    starts = [s for s in ([b[0] for b in steps_of(e)] for e in examples) if len(s) >= 5]
    assert len(starts) > 0.9 * len(examples)
    assert sum(s == sorted(s) for s in starts) == 0
    # the first step is anywhere in the context, not at the leftmost block
    assert sum(s[0] == min(s) for s in starts) < 0.1 * len(starts)


def test_corruption_is_80_mask_10_random_10_kept_and_random_tokens_are_normal_words(corpus, d):
    ds, examples = corpus
    mask_idx = d.index(MASK_SYMBOL)
    normal = set(words(d).tolist())
    n = n_mask = n_keep = 0
    randoms = []
    for index, e in enumerate(examples):
        raw = raw_context(ds, index, e, d)
        ctx = e["kinds"] == CONTEXT
        pos = sorted(p for b in steps_of(e) for p in b)
        shown, orig = e["tokens"][pos], raw[pos]
        n += len(pos)
        n_mask += int((shown == mask_idx).sum())
        n_keep += int((shown == orig).sum())
        randoms += shown[(shown != mask_idx) & (shown != orig)].tolist()
        unmasked = ctx.clone()
        unmasked[pos] = False
        assert torch.equal(e["tokens"][unmasked], raw[: int(ctx.sum())][unmasked[: int(ctx.sum())]])
    assert n > 10000
    # a random draw equal to the original counts as kept (1 in 100 of the 10%)
    assert abs(n_mask / n - 0.8) < 0.02
    assert abs(len(randoms) / n - 0.1) < 0.02
    assert abs(n_keep / n - 0.1) < 0.02
    assert set(randoms) <= normal and not set(randoms) & special_ids(d)
    assert len(set(randoms)) > 0.8 * N_WORDS  # drawn from the whole vocabulary


def test_appended_tokens_carry_the_position_and_segment_of_the_context_token_they_stand_for(corpus):
    _, examples = corpus
    for e in examples[:60]:
        ctx = e["kinds"] == CONTEXT
        n_ctx = int(ctx.sum())
        assert torch.equal(e["positions"][:n_ctx], torch.arange(n_ctx))  # context first, 0..n-1
        app = ~ctx
        assert not ctx[n_ctx:].any()
        pos = e["positions"][app]
        assert (pos < n_ctx).all()
        assert torch.equal(e["segments"][app], e["segments"][pos])


def test_each_step_is_its_p_tokens_then_its_originals_and_p_predicts_the_original(corpus, d):
    ds, examples = corpus
    p_idx = d.index(PSEUDO_SYMBOL)
    for index, e in enumerate(examples[:60]):
        raw = raw_context(ds, index, e, d)
        n_ctx = int((e["kinds"] == CONTEXT).sum())
        col = n_ctx
        for s, block in enumerate(steps_of(e), start=1):
            n = len(block)
            # steps are laid out in order: n [P]s then n originals, contiguous
            assert e["kinds"][col : col + n].tolist() == [PSEUDO] * n
            assert e["kinds"][col + n : col + 2 * n].tolist() == [ORIGINAL] * n
            assert e["steps"][col : col + 2 * n].tolist() == [s] * (2 * n)
            assert e["positions"][col + n : col + 2 * n].tolist() == block
            assert (e["tokens"][col : col + n] == p_idx).all()
            assert torch.equal(e["tokens"][col + n : col + 2 * n], raw[block])  # true copies
            assert torch.equal(e["target"][col : col + n], raw[block])  # [P] predicts the original
            assert (e["target"][col + n : col + 2 * n] == d.pad()).all()  # copies carry no loss
            col += 2 * n
        assert col == len(e["kinds"])


def test_context_is_sos_s1_eos_s2_eos_with_segments_0_then_1(corpus, d):
    ds, examples = corpus
    for index, e in enumerate(examples[:60]):
        ctx = e["kinds"] == CONTEXT
        seg, raw = e["segments"][ctx], raw_context(ds, index, e, d)
        n1 = int((seg == 0).sum()) - 2
        assert len(raw) == int(ctx.sum()) <= 512
        assert raw[0] == d.bos() and raw[n1 + 1] == d.eos() and raw[-1] == d.eos()
        assert n1 >= 1 and len(raw) - n1 - 3 >= 1  # S1 and S2 non-empty
        assert seg.tolist() == [0] * (n1 + 2) + [1] * (len(raw) - n1 - 2)
        assert not (set(raw[1 : n1 + 1].tolist()) | set(raw[n1 + 2 : -1].tolist())) & {d.bos(), d.eos()}


@pytest.mark.parametrize("objective", ["ar", "ae+ar"])
def test_ar_objectives_mask_single_token_steps_only(objective, d):
    ds = long_dataset(d, seed=3, objective=objective, n_docs=8)
    total = masked = 0
    for i in range(min(len(ds), 15)):
        e = ds[i]
        blocks = steps_of(e)
        assert blocks and all(len(b) == 1 for b in blocks)
        masked += len(blocks)
        total += int((e["kinds"] == CONTEXT).sum()) - 3
    assert abs(masked / total - 0.15) < 0.01
    if objective == "ar":
        assert not any(((e["kinds"] == CONTEXT) & (e["target"] != d.pad())).any() for e in (ds[0], ds[1]))


def test_ae_objective_has_no_appended_part_but_ae_targets(d):
    ds = long_dataset(d, seed=4, objective="ae", n_docs=8)
    for i in range(min(len(ds), 15)):
        e = ds[i]
        assert (e["kinds"] == CONTEXT).all()
        ae = e["target"] != d.pad()
        assert abs(int(ae.sum()) / (len(e["kinds"]) - 3) - 0.15) < 0.02
        assert (e["tokens"][ae] == d.index(MASK_SYMBOL)).float().mean() > 0.6


def test_par_objective_has_no_ae_targets_but_still_hides_the_masked_context_tokens(d):
    ds = long_dataset(d, seed=5, objective="par", n_docs=8)
    mask_idx = d.index(MASK_SYMBOL)
    for i in range(min(len(ds), 15)):
        e = ds[i]
        ctx = e["kinds"] == CONTEXT
        assert not ((e["target"] != d.pad()) & ctx).any()
        assert (e["target"][e["kinds"] == PSEUDO] != d.pad()).all()
        pos = [p for b in steps_of(e) for p in b]
        assert pos and (e["tokens"][pos] == mask_idx).float().mean() > 0.6


def test_an_example_is_a_function_of_seed_epoch_and_index(d):
    lines = long_documents(np.random.default_rng(6), d, 6)
    a = make_dataset(lines, d, tokens_per_sample=128, seed=3)
    b = make_dataset(lines, d, tokens_per_sample=128, seed=3)
    n = len(a)
    assert n >= 20
    first = [a[i] for i in range(n)]
    for i in reversed(range(n)):  # another instance, another access order
        e = b[i]
        keys = ("tokens", "positions", "segments", "kinds", "steps", "target")
        assert all(torch.equal(first[i][k], e[k]) for k in keys)
    a.set_epoch(2)
    second = [a[i] for i in range(n)]
    differ = sum(not (len(x["kinds"]) == len(y["kinds"]) and torch.equal(x["tokens"], y["tokens"])
                      and torch.equal(x["positions"], y["positions"])) for x, y in zip(first, second))
    assert differ >= 0.9 * n
    a.set_epoch(1)
    assert all(torch.equal(first[i]["tokens"], a[i]["tokens"]) for i in range(n))
    other_seed = make_dataset(lines, d, tokens_per_sample=128, seed=4)
    assert sum(not torch.equal(first[i]["positions"], other_seed[i]["positions"]) for i in range(n)) >= 0.9 * n


def test_ae_par_and_ae_plus_par_corrupt_the_same_context_positions_for_one_seed_epoch_and_index(d):
    """The objective ablation compares objectives on paired draws: for one seed, epoch and index,
    AE, PAR and AE+PAR mask the same blocks with the same corruption, and differ only in what is
    appended and which cells carry a loss (AE's targets are the blocks PAR's [P] tokens predict)."""
    lines = long_documents(np.random.default_rng(8), d, 6)
    runs = {o: make_dataset(lines, d, tokens_per_sample=128, objective=o, seed=5) for o in ("ae", "par", "ae+par")}
    n = len(runs["ae"])
    assert n >= 20
    for epoch in (1, 3):
        for ds in runs.values():
            ds.set_epoch(epoch)
        for i in range(n):
            ae, par, both = (runs[o][i] for o in ("ae", "par", "ae+par"))
            context = [e["tokens"][e["kinds"] == CONTEXT] for e in (ae, par, both)]
            assert torch.equal(context[0], context[1]) and torch.equal(context[0], context[2])
            masked = (ae["target"] != d.pad()).nonzero().flatten().tolist()
            assert masked == (both["target"][both["kinds"] == CONTEXT] != d.pad()).nonzero().flatten().tolist()
            assert steps_of(par) == steps_of(both) and sorted(p for b in steps_of(par) for p in b) == masked


def chunks_of(pieces, offsets):
    return [pieces[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def test_pack_documents_skips_short_documents_splits_long_sentences_and_counts_both():
    # sizes include each line's EOS; 1 = a blank line (document boundary)
    sizes = [4, 3, 1,  2, 1,  20, 1,  5, 5, 5, 1,  1, 1,  2, 2, 1]
    pieces, offsets, stats = pack_documents(sizes, max_tokens=8)
    assert stats == {"documents": 5, "short_documents": 1, "long_sentences": 1}
    chunks = chunks_of(pieces, offsets)
    assert chunks == [
        [[0, 0, 3], [1, 0, 2]],           # document 1: both sentences fit one chunk
        # document 2 (line 3, one token): skipped
        [[5, 0, 8]], [[5, 8, 16]], [[5, 16, 19]],  # the 19-token sentence in pieces of <= 8
        [[7, 0, 4], [8, 0, 4]], [[9, 0, 4]],  # greedy packing, never across documents
        [[13, 0, 1], [14, 0, 1]],           # two one-token sentences: a 2-token document
    ]


def test_pack_documents_never_mixes_documents_and_keeps_every_token_of_usable_ones_in_order():
    rng = np.random.default_rng(12)
    for _ in range(30):
        max_tokens = int(rng.integers(3, 40))
        sizes, doc_of_line, docs = [], {}, []
        for doc in range(int(rng.integers(1, 12))):
            lines = []
            for _ in range(int(rng.integers(0, 6))):
                doc_of_line[len(sizes)] = doc
                lines.append(len(sizes))
                sizes.append(int(rng.integers(2, 2 * max_tokens)))
            sizes.append(1)
            docs.append(lines)
        pieces, offsets, stats = pack_documents(sizes, max_tokens)
        assert stats["long_sentences"] == sum(s - 1 > max_tokens for s in sizes)
        tokens_of = {doc: [] for doc in range(len(docs))}
        for chunk in chunks_of(pieces, offsets):
            owners = {doc_of_line[line] for line, _, _ in chunk}
            assert len(owners) == 1, "a chunk mixes two documents"
            n = sum(e - s for _, s, e in chunk)
            assert 2 <= n <= max_tokens
            tokens_of[owners.pop()] += [(line, t) for line, s, e in chunk for t in range(s, e)]
        short = 0
        for doc, lines in enumerate(docs):
            everything = [(line, t) for line in lines for t in range(sizes[line] - 1)]
            short += len(everything) < 2 and len(lines) > 0
            got = tokens_of[doc]
            assert got == sorted(got) and len(set(got)) == len(got)  # in order, no token twice
            assert set(got) <= set(everything)
            # what is lost: short documents, or a chunk that could only hold a 1-token piece
            one_token_pieces = sum((sizes[line] - 1) % max_tokens == 1 or sizes[line] == 2 for line in lines)
            assert len(everything) - len(got) <= (one_token_pieces if len(everything) >= 2 else len(everything))
        assert stats["short_documents"] == short


def test_dataset_examples_never_span_two_documents(d):
    """Each document uses one word only, so an example mixing documents would show two."""
    lines = []
    for doc in range(12):
        word = d.nspecial + doc
        for n in np.random.default_rng(doc).integers(5, 40, size=8):
            lines.append([word] * int(n))
        lines.append([])
    ds = make_dataset(lines, d, tokens_per_sample=64, objective="ae")
    assert len(ds) > 12
    for i in range(len(ds)):
        body = set(np.concatenate(ds.sentences(i)).tolist())
        assert len(body) == 1


def test_the_objectives_are_the_papers_table_6():
    """Which losses each objective trains (docs/DESIGN.md §3): AR is PAR with one-token blocks."""
    from fairseq_pmlm.objectives import OBJECTIVES

    assert {o.name: (o.loss_parts, o.one_token_blocks) for o in OBJECTIVES} == {
        "ae": (("ae",), False), "ar": (("par",), True), "par": (("par",), False),
        "ae+ar": (("ae", "par"), True), "ae+par": (("ae", "par"), False)}
