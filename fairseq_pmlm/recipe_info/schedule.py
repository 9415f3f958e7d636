"""How many updates a fine-tuning recipe runs, and how many of them warm up."""
import math


def schedule(examples, batch, epochs, warmup_ratio, updates=None):
    """(updates, warmup updates) of ``epochs`` epochs of ``examples`` at ``batch`` an update, or of
    ``updates`` updates when given (the warmup keeps its share): the linear schedules of the
    fine-tuning recipes need the total up front."""
    if examples < 1 or batch < 1 or epochs < 1 or not 0 <= warmup_ratio < 1:
        raise ValueError(f"schedule: need examples, batch and epochs >= 1 and a warmup ratio in [0, 1), got "
                         f"{examples}, {batch}, {epochs}, {warmup_ratio}")
    if updates is not None and updates < 1:
        raise ValueError(f"schedule: need updates >= 1, got {updates}")
    updates = math.ceil(examples / batch) * epochs if updates is None else updates
    warmup = max(1, round(warmup_ratio * updates)) if warmup_ratio > 0 else 0
    return updates, warmup
