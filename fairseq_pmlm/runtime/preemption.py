"""SIGTERM or SIGUSR1 (what Slurm and Kubernetes send before they kill a job) during training:
save a checkpoint at the next update boundary and stop, so that the same command resumes exactly.

While ``fairseq_cli.train.main`` runs, the handler of these signals only records the signal:
whatever the process is doing (a forward pass, a save) finishes. After each update
(``validate_and_save``, which fairseq calls on every rank) the ranks agree on whether any of
them was signalled (one all-reduce of two numbers; none without a process group), so all stop
at the same update: the checkpoint (``checkpoint_last.pt``, written atomically by
checkpoint_files.py) is saved unless fairseq just saved this update, every rank waits for it,
and the process exits with status 128 + the signal's number (143 for SIGTERM, like a process
the signal ended: a job system or a ``set -e`` script sees that training did not finish)
after one line, ``pmlm: SIGTERM received: saved DIR/checkpoint_last.pt at update N; rerun the
same command to resume``. A signal on the last update lets the run finish normally (status 0).
More signals change nothing (torchrun forwards the one Slurm also delivers); SIGKILL still
stops the process at once and leaves the last complete checkpoint.

Data-loader workers leave these signals to the main process, which stops them when it exits. A
scheduler signals the whole process group, and a worker that died of it would take the training
down with a DataLoader error ("worker exited unexpectedly") before the save. SIGUSR1: a worker
inherits the handler, which records nothing outside the main process. SIGTERM: torch's worker
start replaces any handler with its own (exit quietly if the main process sent it, else die), so
a worker forked during training blocks SIGTERM and a thread of its own takes it: from the main
process (torch stopping a worker that does not finish) it exits as torch's handler would; from
anyone else it is ignored.
"""
import logging
import os
import signal
import sys
import threading

import torch
from fairseq import checkpoint_utils
from fairseq.distributed import utils as distributed_utils
from fairseq_cli import train as fairseq_train
from torch.utils.data._utils import signal_handling

from .checkpoint_files import SAVED, save_dir_kept_only_if_used

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
logger = logging.getLogger(__name__)
_state = {"owner": None, "previous": {}, "received": []}


def _record(signum, frame):
    if os.getpid() == _state["owner"]:  # not in a forked data-loader worker
        _state["received"].append(signum)


def install():
    """Record SIGTERM/SIGUSR1 from now on (in the main thread only, where Python runs handlers)."""
    if _state["owner"] == os.getpid() or threading.current_thread() is not threading.main_thread():
        return False
    _state.update(owner=os.getpid(), received=[])
    SAVED.clear()  # an earlier run in this process saved elsewhere
    _state["previous"] = {s: signal.signal(s, _record) for s in SIGNALS}
    return True


def uninstall():
    for s, handler in _state["previous"].items():
        signal.signal(s, handler)
    _state.update(owner=None, previous={})


def train_main(cfg, **kwargs):
    """fairseq-train's ``main`` (every plugin training command runs it) with the handler installed,
    and without the empty --save-dir a run that stops on bad input would leave."""
    installed = install()
    try:
        with save_dir_kept_only_if_used(cfg.checkpoint.save_dir):
            return _fairseq["main"](cfg, **kwargs)
    finally:
        if installed:
            uninstall()


def _worker_signal_handlers():
    _fairseq["worker_signal_handlers"]()  # torch's: SIGSEGV, SIGBUS, SIGFPE and SIGTERM, in C
    if _state["owner"] != os.getppid():  # forked outside training, or spawned: torch's as they are
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # threads started later inherit this
    threading.Thread(target=_take_sigterm, name="pmlm-worker-sigterm", daemon=True).start()


def _take_sigterm():
    while True:
        if signal.sigwaitinfo({signal.SIGTERM}).si_pid == os.getppid():
            os._exit(0)


def agree(trainer, signum, saved):
    """(signal, saved) as all ranks see them: the largest of each across ranks."""
    if trainer.data_parallel_world_size == 1:
        return signum, saved
    flags = torch.tensor([signum, int(saved)], dtype=torch.long, device=trainer.device)
    distributed_utils.all_reduce(flags, group=trainer.data_parallel_process_group, op="max")
    return int(flags[0]), bool(flags[1])


def validate_and_save(cfg, trainer, task, epoch_itr, valid_subsets, end_of_epoch):
    install()  # a process fairseq spawned runs fairseq's main: install at its first update
    valid_losses, should_stop = _fairseq["validate_and_save"](cfg, trainer, task, epoch_itr, valid_subsets,
                                                               end_of_epoch)
    updates = trainer.get_num_updates()
    ours = [p for p, u in SAVED.items() if u == updates]  # written by this rank at this update
    signum, saved = agree(trainer, max(_state["received"], default=0), bool(ours))
    if not signum:
        return valid_losses, should_stop
    name = signal.Signals(signum).name
    if should_stop:  # fairseq saved and is finishing anyway
        if trainer.data_parallel_rank == 0:
            print(f"pmlm: {name} received on the last update: finishing normally", file=sys.stderr, flush=True)
        return valid_losses, should_stop
    if not saved:
        path = checkpoint_utils.save_checkpoint(cfg.checkpoint, trainer, epoch_itr, valid_losses[0])
        if path is not None and hasattr(task, "post_save"):
            task.post_save(path, updates)
        ours = [p for p, u in SAVED.items() if u == updates]
    if trainer.data_parallel_world_size > 1:  # no rank leaves (and no launcher ends rank 0) mid-save
        distributed_utils.all_reduce(torch.zeros(1, device=trainer.device), group=trainer.data_parallel_process_group)
    if trainer.data_parallel_rank == 0:
        last = [p for p in ours if os.path.basename(p).startswith("checkpoint_last")]
        what = (f"saved {(last or ours)[0]} at update {updates}; rerun the same command to resume"
                if ours else f"stopped at update {updates} without saving a checkpoint"
                + (" (--no-save)" if cfg.checkpoint.no_save else ""))
        print(f"pmlm: {name} received: {what}", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


_fairseq = fairseq_train.__dict__.setdefault("_pmlm_originals", {
    "main": fairseq_train.main, "validate_and_save": fairseq_train.validate_and_save,
    "worker_signal_handlers": signal_handling._set_worker_signal_handlers})
fairseq_train.main = train_main  # not functools.wraps: a process fairseq spawns unpickles this one
fairseq_train.validate_and_save = validate_and_save
signal_handling._set_worker_signal_handlers = _worker_signal_handlers  # a worker looks it up at its start
