"""The attention rule equals a slow reference written from PMLM-SPEC's table."""
import numpy as np
import pytest
import torch

from conftest import make_dataset, random_documents
from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PAD, PSEUDO, attention_allowed

OBJECTIVES = ["ae+par", "ae", "par", "ar", "ae+ar"]


def spec_table(q_kind, q_step, k_kind, k_step):
    """PMLM-SPEC section 2, row by row; padding is never seen."""
    if k_kind == PAD:
        return False
    if q_kind == CONTEXT:  # every context token; nothing appended
        return k_kind == CONTEXT
    if q_kind == PSEUDO:  # context; originals of earlier steps; [P]s of its own step
        return (k_kind == CONTEXT or (k_kind == ORIGINAL and k_step < q_step)
                or (k_kind == PSEUDO and k_step == q_step))
    if q_kind == ORIGINAL:  # context; originals of steps up to its own
        return k_kind == CONTEXT or (k_kind == ORIGINAL and k_step <= q_step)
    raise AssertionError("padding rows are checked separately")


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_rule_equals_spec_table_on_random_padded_batches(objective, dictionary, rng):
    ds = make_dataset(random_documents(rng, dictionary, 40), dictionary, tokens_per_sample=48, objective=objective)
    for start in range(0, 24, 6):
        batch = ds.collater([ds[i] for i in range(start, start + 6)])
        kinds, steps = batch["net_input"]["kinds"], batch["net_input"]["steps"]
        allowed = attention_allowed(kinds, steps, kinds, steps)
        for b in range(kinds.size(0)):
            kb, sb = kinds[b].tolist(), steps[b].tolist()
            for i, (qk, qs) in enumerate(zip(kb, sb)):
                row = allowed[b, i].tolist()
                if qk == PAD:  # unused output, but its softmax row must not be empty or see padding
                    assert any(row) and not any(r and k == PAD for r, k in zip(row, kb))
                    continue
                expect = [spec_table(qk, qs, kk, ks) for kk, ks in zip(kb, sb)]
                assert row == expect, (b, i)


def test_pseudo_never_sees_its_own_original_and_context_never_sees_originals(dictionary, rng):
    ds = make_dataset(random_documents(rng, dictionary, 30), dictionary, tokens_per_sample=48)
    batch = ds.collater([ds[i] for i in range(20)])
    kinds, steps, pos = (batch["net_input"][k] for k in ("kinds", "steps", "positions"))
    allowed = attention_allowed(kinds, steps, kinds, steps)
    q_pseudo = (kinds == PSEUDO).unsqueeze(-1)
    k_orig = (kinds == ORIGINAL).unsqueeze(-2)
    same_position = pos.unsqueeze(-1) == pos.unsqueeze(-2)
    assert not (allowed & q_pseudo & k_orig & same_position).any()  # explicit leakage
    assert not (allowed & (kinds == CONTEXT).unsqueeze(-1) & (kinds >= PSEUDO).unsqueeze(-2)).any()  # implicit


def test_context_rows_never_see_columns_after_prefix_len(dictionary, rng):
    """The invariant that lets the model skip the context-to-appended block."""
    ds = make_dataset(random_documents(rng, dictionary, 30), dictionary, tokens_per_sample=48)
    batch = ds.collater([ds[i] for i in range(16)])
    ni = batch["net_input"]
    p = ni["prefix_len"]
    kinds, steps = ni["kinds"], ni["steps"]
    assert (kinds[:, p:] != CONTEXT).all() and (kinds[:, :p] <= CONTEXT).all()
    allowed = attention_allowed(kinds, steps, kinds, steps)
    assert not allowed[:, :p, p:].any()
