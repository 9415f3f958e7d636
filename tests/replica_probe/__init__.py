"""A probe on fairseq's ``Trainer.train_step``, loaded like any plugin with a second
``--user-dir tests/replica_probe`` (the last ``--user-dir`` wins; the launcher has already
imported fairseq_pmlm), so test_distributed.py runs the documented commands unchanged.

After every update it records what this process's trainer sees: its data-parallel rank and
world size, the ids of the examples it trained on, and all its parameters; at exit they go
to ``$PROBE_OUT/rank{rank}.pt``. It changes nothing in the training.
"""
import atexit
import os

import torch
from fairseq.trainer import Trainer

import fairseq_pmlm  # noqa: F401  (the plugin itself, for plain fairseq-train)

updates = []
_train_step = Trainer.train_step


def probed_train_step(self, samples, *args, **kwargs):
    out = _train_step(self, samples, *args, **kwargs)
    updates.append({
        "update": self.get_num_updates(),
        "rank": self.data_parallel_rank,
        "world_size": self.data_parallel_world_size,
        "ids": sorted(int(i) for s in samples if s for i in s["id"]),
        "params": torch.cat([p.detach().flatten() for p in self.get_model().parameters()]).clone(),
    })
    return out


@atexit.register
def save():
    if updates:
        torch.save(updates, os.path.join(os.environ["PROBE_OUT"], f"rank{updates[0]['rank']}.pt"))


Trainer.train_step = probed_train_step
