"""Blockwise masking (paper Algorithm 1), the 80/10/10 corruption and the PMLM example layout
(docs/DESIGN.md §3). The corruption is also the seq2seq task's target word drop (§4).

Pure functions of a numpy Generator, so an example is a function of (seed, epoch, index).
"""
from dataclasses import dataclass

import numpy as np

from ..modules.attention_rule import CONTEXT, ORIGINAL, PSEUDO
from ..objectives import Objective


@dataclass
class MaskingConfig:
    mask_prob: float = 0.15  # stop once this fraction of the maskable tokens is masked (sample_blocks)
    block_prob: float = 0.4  # probability that a sampled block is an n-gram
    min_block: int = 2
    max_block: int = 6
    random_token_prob: float = 0.1
    leave_unmasked_prob: float = 0.1


def sample_blocks(rng, maskable, cfg: MaskingConfig):
    """Algorithm 1. ``maskable``: bool [n] (False at special tokens).

    Returns the factorization order as a list of (start, length), in the order appended.
    A block running past the end, over a special token, or over an already masked
    position is rejected and resampled.

    Stop rule: once ``mask_prob`` of the *maskable* tokens are masked. The paper writes
    ``sum |M| >= 0.15 |x|``, x the whole input; we leave out the three special tokens, which can
    never be masked, so that short contexts (where they are a large share) get the stated ratio
    too. On a 512-token context the two goals differ by 0.45 tokens (docs/DESIGN.md §3).
    """
    n = len(maskable)
    goal = cfg.mask_prob * int(maskable.sum())
    masked = np.zeros(n, dtype=bool)
    blocks, count = [], 0
    budget = 100 * n + 100  # only degenerate inputs (almost nothing maskable) exhaust it
    while count < goal and budget > 0:
        budget -= 1
        p = int(rng.integers(n))
        length = int(rng.integers(cfg.min_block, cfg.max_block + 1)) if rng.random() < cfg.block_prob else 1
        end = p + length
        if end > n or not maskable[p:end].all() or masked[p:end].any():
            continue
        masked[p:end] = True
        blocks.append((p, length))
        count += length
    return blocks


def corrupt(rng, tokens, positions, cfg: MaskingConfig, mask_idx, random_candidates):
    """80/10/10: a copy of ``tokens`` (1-d) with, at each of ``positions``, ``[MASK]``, a random
    token of ``random_candidates`` (``symbols.random_token_candidates``) or the original, split
    by ``cfg.random_token_prob`` and ``cfg.leave_unmasked_prob``. Pre-training corrupts the
    masked context with it, fine-tuning the dropped target inputs (``tasks/pmlm_seq2seq.py``)."""
    out = tokens.copy()
    u = rng.random(len(positions))
    to_mask = u < 1.0 - cfg.random_token_prob - cfg.leave_unmasked_prob
    to_random = (~to_mask) & (u < 1.0 - cfg.leave_unmasked_prob)
    out[positions[to_mask]] = mask_idx
    out[positions[to_random]] = rng.choice(random_candidates, size=int(to_random.sum()))
    return out


def build_example(rng, context, segments, maskable, cfg, objective: Objective, mask_idx, pseudo_idx, pad_idx,
                  random_candidates):
    """Context (uncorrupted token ids, with specials) -> one PMLM training example.

    ``objective``: which parts the example holds (``objectives.py``).
    Returns a dict of equally long int64 arrays: tokens, positions, segments, kinds, steps,
    target (pad where no loss). Layout: context, then per step i: its [P]s, then copies of
    its original tokens, each with the position/segment id of the context token it stands for.
    """
    if objective.one_token_blocks:
        cfg = MaskingConfig(**{**cfg.__dict__, "block_prob": 0.0})
    blocks = sample_blocks(rng, maskable, cfg)
    masked = np.concatenate([np.arange(p, p + n) for p, n in blocks]) if blocks else np.zeros(0, np.int64)
    n = len(context)
    target = np.full(n, pad_idx, dtype=np.int64)
    if objective.ae:
        target[masked] = context[masked]
    parts = {
        "tokens": [corrupt(rng, context, masked, cfg, mask_idx, random_candidates)],
        "positions": [np.arange(n)],
        "segments": [segments],
        "kinds": [np.full(n, CONTEXT)],
        "steps": [np.zeros(n, dtype=np.int64)],
        "target": [target],
    }
    if objective.par:
        for step, (p, n) in enumerate(blocks, start=1):
            span = np.arange(p, p + n)
            original = context[span]
            parts["tokens"] += [np.full(n, pseudo_idx), original]
            parts["positions"] += [span, span]
            parts["segments"] += [segments[span], segments[span]]
            parts["kinds"] += [np.full(n, PSEUDO), np.full(n, ORIGINAL)]
            parts["steps"] += [np.full(n, step), np.full(n, step)]
            parts["target"] += [original, np.full(n, pad_idx)]
    return {k: np.concatenate(v).astype(np.int64) for k, v in parts.items()}
