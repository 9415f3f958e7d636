"""The attention rule (``attention_allowed``) equals a slow reference written from the table
of docs/DESIGN.md §1, on padded batches of random examples of every objective.

The reference does not read ``kinds``/``steps``: it reads each token's role off the collated
token ids and the layout docs/DESIGN.md §3 describes (context first; then, per factorization step in
order, that step's [P] tokens followed by as many original copies; padding is the pad id), so
it also checks that ``build_example``/``collater`` label every token with the right kind/step.
"""
import numpy as np
import pytest
import torch

from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PAD, PSEUDO, attention_allowed
from fairseq_pmlm.symbols import PSEUDO_SYMBOL

from helpers import OBJECTIVES, collate, example, random_context

pytestmark = pytest.mark.usefixtures("one_thread")


def spec_sees(q_role, q_step, k_role, k_step):
    """docs/DESIGN.md §1, the attention table, one (query, key) pair at a time."""
    if k_role == "pad":  # padding never seen
        return False
    if q_role == "context":  # every context token; nothing appended
        return k_role == "context"
    if q_role == "P":  # every context token; originals of steps j < i; the [P]s of step i
        return (k_role == "context"
                or (k_role == "original" and k_step < q_step)
                or (k_role == "P" and k_step == q_step))
    if q_role == "original":  # every context token; originals of steps j <= i
        return k_role == "context" or (k_role == "original" and k_step <= q_step)
    raise ValueError(q_role)


def roles_from_layout(tokens, prefix_len, pad, pseudo):
    """(role, step) of every column of one collated row, from the token ids alone."""
    tokens = tokens.tolist()
    roles = [("pad", 0) if t == pad else ("context", 0) for t in tokens[:prefix_len]]
    j, step = prefix_len, 0
    while j < len(tokens) and tokens[j] != pad:
        assert tokens[j] == pseudo, f"a step must start with its [P] tokens (column {j})"
        step += 1
        n = 0
        while tokens[j + n] == pseudo:
            n += 1
        originals = tokens[j + n : j + 2 * n]
        assert len(originals) == n and pad not in originals and pseudo not in originals
        roles += [("P", step)] * n + [("original", step)] * n
        j += 2 * n
    assert all(t == pad for t in tokens[j:]), "only padding after the last step"
    return roles + [("pad", 0)] * (len(tokens) - j)


def random_batch(rng, d, objective, size=6):
    """Examples of random lengths, random factorization orders and mask ratios, collated."""
    samples = []
    for _ in range(size):
        ctx, seg, maskable = random_context(rng, d, int(rng.integers(1, 31)), int(rng.integers(1, 31)))
        samples.append(example(int(rng.integers(1 << 30)), ctx, seg, maskable, d, objective,
                               mask_prob=float(rng.choice([0.15, 0.3, 0.5]))))
    return collate(samples, d)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_rule_equals_the_spec_table_for_every_non_pad_query_of_random_padded_batches(objective, dictionary):
    rng = np.random.default_rng(["ae+par", "ae", "par", "ar", "ae+ar"].index(objective))
    pad, pseudo = dictionary.pad(), dictionary.index(PSEUDO_SYMBOL)
    checked_rows = {"context": 0, "P": 0, "original": 0}
    max_step = 0
    for _ in range(8):
        batch = random_batch(rng, dictionary, objective)
        ni = batch["net_input"]
        kinds, steps = ni["kinds"], ni["steps"]
        allowed = attention_allowed(kinds, steps, kinds, steps)
        assert allowed.dtype == torch.bool and allowed.shape == (*kinds.shape, kinds.size(1))
        for b in range(kinds.size(0)):
            roles = roles_from_layout(ni["src_tokens"][b], ni["prefix_len"], pad, pseudo)
            # the compact description agrees with the layout
            code = {"pad": PAD, "context": CONTEXT, "P": PSEUDO, "original": ORIGINAL}
            assert kinds[b].tolist() == [code[r] for r, _ in roles]
            assert steps[b].tolist() == [s for _, s in roles]
            for i, (qr, qs) in enumerate(roles):
                row = allowed[b, i].tolist()
                if qr == "pad":  # output unused, but its softmax row must be finite: >= 1 key, no pad
                    assert any(row), (b, i)
                    assert not any(a and kr == "pad" for a, (kr, _) in zip(row, roles)), (b, i)
                    continue
                assert row == [spec_sees(qr, qs, kr, ks) for kr, ks in roles], (objective, b, i, qr, qs)
                checked_rows[qr] += 1
                max_step = max(max_step, qs)
    # the comparison covered every kind of query the objective has
    assert checked_rows["context"] > 0
    if objective == "ae":
        assert checked_rows["P"] == checked_rows["original"] == 0
    else:
        assert checked_rows["P"] > 0 and checked_rows["original"] > 0 and max_step >= 5


def test_rule_equals_the_spec_table_on_arbitrary_kind_and_step_arrays():
    """Beyond the layouts build_example makes: any order of kinds, any steps."""
    rng = np.random.default_rng(11)
    role = {CONTEXT: "context", PSEUDO: "P", ORIGINAL: "original", PAD: "pad"}
    for _ in range(20):
        T = int(rng.integers(2, 25))
        kinds = torch.from_numpy(rng.integers(0, 4, size=(3, T)))
        kinds[:, int(rng.integers(T))] = CONTEXT  # every row has a context token
        steps = torch.from_numpy(rng.integers(1, 6, size=(3, T)))
        steps[kinds <= CONTEXT] = 0
        allowed = attention_allowed(kinds, steps, kinds, steps)
        for b in range(3):
            kb, sb = kinds[b].tolist(), steps[b].tolist()
            for i in range(T):
                row = allowed[b, i].tolist()
                if kb[i] == PAD:
                    assert any(row) and not any(a and k == PAD for a, k in zip(row, kb))
                    continue
                assert row == [spec_sees(role[kb[i]], sb[i], role[k], s) for k, s in zip(kb, sb)]


def test_rule_accepts_different_query_and_key_sets():
    """[..., Tq] queries against [..., Tk] keys (incremental decoding shape)."""
    qk, qs = torch.tensor([[PSEUDO, ORIGINAL]]), torch.tensor([[2, 2]])
    kk = torch.tensor([[CONTEXT, ORIGINAL, PSEUDO, ORIGINAL, PSEUDO, PAD]])
    ks = torch.tensor([[0, 1, 2, 2, 3, 0]])
    expect = torch.tensor([[[True, True, True, False, False, False],
                            [True, True, False, True, False, False]]])
    assert torch.equal(attention_allowed(qk, qs, kk, ks), expect)


def many_batches(dictionary, seed, n=10):
    rng = np.random.default_rng(seed)
    return [random_batch(rng, dictionary, "ae+par", size=8) for _ in range(n)]


def test_every_non_pad_query_may_attend_to_at_least_one_key(dictionary):
    for batch in many_batches(dictionary, 21):
        kinds, steps = batch["net_input"]["kinds"], batch["net_input"]["steps"]
        allowed = attention_allowed(kinds, steps, kinds, steps)
        assert allowed.any(-1).all()  # pad rows too: no all -inf softmax row anywhere
        assert allowed.diagonal(dim1=-2, dim2=-1)[kinds != PAD].all()  # and each token sees itself


def test_pseudo_token_never_sees_the_original_copy_of_its_own_block(dictionary):
    """Explicit leakage: [P] at position p must not see the original token at p (nor any
    original of its own or a later step)."""
    seen_pairs = 0
    for batch in many_batches(dictionary, 22):
        ni = batch["net_input"]
        kinds, steps, pos = ni["kinds"], ni["steps"], ni["positions"]
        allowed = attention_allowed(kinds, steps, kinds, steps)
        q_p = (kinds == PSEUDO).unsqueeze(-1)
        k_o = (kinds == ORIGINAL).unsqueeze(-2)
        same_pos = pos.unsqueeze(-1) == pos.unsqueeze(-2)
        own = q_p & k_o & same_pos
        seen_pairs += int(own.sum())
        assert not (allowed & own).any()
        assert not (allowed & q_p & k_o & (steps.unsqueeze(-2) >= steps.unsqueeze(-1))).any()
    assert seen_pairs > 100  # there were such pairs to check


def test_context_tokens_never_see_any_appended_token(dictionary):
    """Implicit leakage: no context token (incl. [MASK]) sees an original copy (or a [P])."""
    for batch in many_batches(dictionary, 23):
        ni = batch["net_input"]
        kinds, steps = ni["kinds"], ni["steps"]
        assert (kinds == ORIGINAL).any()
        allowed = attention_allowed(kinds, steps, kinds, steps)
        q_ctx = (kinds == CONTEXT).unsqueeze(-1)
        assert not (allowed & q_ctx & (kinds == ORIGINAL).unsqueeze(-2)).any()
        assert not (allowed & q_ctx & (kinds == PSEUDO).unsqueeze(-2)).any()


def test_context_rows_of_a_collated_batch_see_no_column_after_prefix_len(dictionary):
    """The invariant that lets the model skip the context-to-appended block (attention_plan)."""
    for batch in many_batches(dictionary, 24, n=5):
        ni = batch["net_input"]
        p, kinds, steps = ni["prefix_len"], ni["kinds"], ni["steps"]
        assert (kinds[:, p:] != CONTEXT).all() and (kinds[:, :p] <= CONTEXT).all()
        allowed = attention_allowed(kinds, steps, kinds, steps)
        assert not allowed[:, :p, p:].any()
