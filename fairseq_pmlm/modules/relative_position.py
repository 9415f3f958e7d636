"""T5-style bucketed relative positions, computed from position ids (docs/DESIGN.md §2)."""
import math

import torch


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    """Bidirectional T5 buckets of ``key_pos - query_pos``.

    Keys to the right (positive relative position) land in the upper half. Half of each
    half is exact distances, the rest log-spaced up to ``max_distance``.
    """
    num_buckets //= 2
    bucket = (relative_position > 0).long() * num_buckets
    n = relative_position.abs()
    max_exact = num_buckets // 2
    is_small = n < max_exact
    # clamp to 1 before log so small distances (handled by is_small) do not produce -inf
    large = max_exact + (
        torch.log(n.clamp(min=1).float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).long()
    large = large.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)
