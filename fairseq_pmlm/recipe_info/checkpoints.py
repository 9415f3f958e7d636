"""Which run a training checkpoint belongs to: whether a save dir's checkpoint_last.pt is the run
a recipe is about to start (its --arch and model flags: ``weights.checkpoint.flags_of_checkpoint``)."""
import os

import torch


def run_of(checkpoint):
    """(task, updates, absolute --finetune-from-model or "none") of a fairseq-train checkpoint:
    whether a save dir's checkpoint_last.pt is the run a recipe is about to start."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
        cfg, history = state["cfg"], state.get("optimizer_history") or [{}]
        init = cfg["checkpoint"].get("finetune_from_model")
        return cfg["task"]["_name"], history[-1].get("num_updates", 0), os.path.abspath(init) if init else "none"
    except Exception as e:  # unreadable or not a training checkpoint: why, in one line
        # as training says it, with the newest intact checkpoint beside it (fairseq: only here)
        from ..runtime.checkpoint_files import inspect, unreadable

        _, reason = inspect(checkpoint)
        if reason is not None:
            raise ValueError(unreadable(checkpoint, reason)) from None
        why = (str(e).splitlines() or [""])[0]
        raise ValueError(f"{checkpoint}: cannot read it ({type(e).__name__}: {why})") from None
