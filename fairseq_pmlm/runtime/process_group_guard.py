"""Refuse a training process that torchrun started but that formed no process group.

Under torchrun (WORLD_SIZE > 1) a plain ``fairseq-train`` on CPU, or with one visible GPU per
process, forms no process group (fairseq 0.12 takes its world size from the CUDA device
count) and silently trains WORLD_SIZE separate models. ``UniLMv2Model.build_model`` calls
``require_process_group``: building the model is the one step every training entry point
(fairseq's and ours) takes after the group would have been formed. The launcher that does
form it is ``distributed_train.py`` (docs/DESIGN.md §8); this module is apart from it so
that the model does not import the launcher.
"""
import os

import torch.distributed as dist

LAUNCHER = "fairseq_pmlm.runtime.distributed_train"


def require_process_group():
    world_size = os.environ.get("WORLD_SIZE", "1")
    if world_size.isdigit() and int(world_size) > 1 and not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            f"WORLD_SIZE={world_size} is set (torchrun) but no process group was formed, so each process "
            f"would train alone: launch with `torchrun ... -m {LAUNCHER} ARGS` (scripts/train_distributed.sh)")
