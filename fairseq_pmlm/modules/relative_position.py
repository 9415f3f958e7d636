"""T5-style bucketed relative positions, computed from position ids (docs/DESIGN.md §2)."""
import math

import torch


def table_problem(num_buckets, max_distance):
    """Why ``relative_position_bucket`` cannot use a table of this size (None if it can): each
    direction has ``num_buckets // 4`` exact distances and log-spaced ones from there to
    ``max_distance``, so fewer than 4 buckets, or a max distance not beyond the exact ones, divides
    by zero or indexes outside the table at the first forward."""
    if num_buckets < 4 or max_distance <= num_buckets // 4:
        return (f"a relative table needs at least 4 buckets and a max distance above buckets // 4 "
                f"({max(num_buckets, 4) // 4})")
    return None


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
