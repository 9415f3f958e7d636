"""Checkpoint files that survive a kill at any instant, and unreadable ones named in one line.

Writing. fairseq 0.12 writes the first file of a save to ``NAME.tmp`` and renames it, but makes
the save's other names (``checkpoint_last.pt``, ``checkpoint_best.pt``, ...) by copying over the
old file: a kill during that copy left a stub in place of the last good ``checkpoint_last.pt``,
and the rerun died in torch's zip reader. Here every checkpoint file is written to
``NAME.tmp`` beside it, fsynced, renamed over NAME (``os.replace``, atomic) and the directory
fsynced: at any instant each name holds its old complete file or its new complete one. The
extra names are copies, not hard links: names sharing one inode would all change when one of
them is rewritten in place (``torch.save`` over checkpoint_best.pt to strip its optimizer state).

Reading. Every load of a checkpoint goes through ``checkpoint_utils.load_checkpoint_to_cpu``
(training's restore, ``--finetune-from-model``, fairseq-generate ``--path``, the hub). When it
fails because the file cannot be read (empty, truncated, not a torch file) the error is one line
naming the file and the newest intact checkpoint beside it (with the command that resumes from
it for ``checkpoint_last.pt``), not torch's traceback; a command-line program prints just that
line (``errors.print_one_line_errors``).

Starting training (``checkpoint_utils.load_checkpoint``): rank 0 checks the file to resume from
before fairseq loads it and every rank stops on its verdict (fairseq loads on rank 0 only, so
an error there would leave the others waiting in a broadcast); a ``--restore-file`` that does
not exist stops (fairseq trains from random weights); leftovers of killed writes
(``checkpoint*.pt.tmp``) are removed; a checkpoint already at ``--max-update`` ends the run with
nothing to do (fairseq trains one more update and overwrites it); a --best-checkpoint-metric the
criterion never logs with this --objective (``par_loss`` with ``ae``) stops (fairseq's KeyError
came after the first validation).

Resuming data-parallel training: fairseq loads the checkpoint on rank 0 and sends it to the
other ranks as ``torch.save`` bytes over the process group, which they ``torch.load`` with
torch's default ``weights_only=True``; that refuses the state's ``DictConfig``, so every
distributed resume died. The receiving ranks load those bytes with ``weights_only=False``: they
are rank 0's own objects, come through the job's own process group, and rank 0 read the file
itself with ``weights_only=True``.

Numbers from numpy. fairseq keeps the best value of ``--best-checkpoint-metric`` as it comes (in
``extra_state`` and the LR scheduler's state): for a metric scipy computes (STS-B's Pearson) a
numpy scalar (older scikit-learn gave them too: CoLA's MCC, MRPC's F1), which ``weights_only``
loading refuses, so such a checkpoint could be neither resumed nor loaded by the hub. Saved here as
Python numbers; numpy scalars in a checkpoint written before are read (numpy's scalar and dtype
allowed).
"""
import contextlib
import glob
import io
import logging
import os
import re
import shutil

import numpy as np
import torch
from fairseq import checkpoint_utils
from fairseq.distributed import utils as distributed_utils
from fairseq.file_io import PathManager

from .. import disk_full
from ..errors import InputNotFound, OneLineError

logger = logging.getLogger(__name__)
SAVED = {}  # path (as fairseq names it) -> the update count of what this process last wrote there
LOADING = {"path": None}  # the checkpoint file read last, for a model's messages about its contents


class CheckpointError(OneLineError, RuntimeError):
    """A checkpoint that cannot be used; the message is one line naming the file."""


# ----------------------------------------------------------------------------- writing
def write_atomically(path, write):
    """``write(f)`` into ``path + ".tmp"``, then fsync and rename it over ``path``."""
    tmp = path + ".tmp"
    try:
        with disk_full.named(path), open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # an error or Ctrl-C: the old file stays, the partial one goes
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:  # the rename itself survives a crash of the machine, not only of the process
        os.fsync(fd)
    finally:
        os.close(fd)


def _local(*paths):
    return not any(PathManager.path_requires_pathmanager(str(p)) for p in paths)


def plain_numbers(x):
    """``x`` with each numpy scalar in its dicts, lists and tuples a Python number; a container is
    rebuilt only where it holds one (a model's state dict keeps its type and ``_metadata``)."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        items = {k: plain_numbers(v) for k, v in x.items()}
        return x if all(items[k] is v for k, v in x.items()) else type(x)(items)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        items = [plain_numbers(v) for v in x]
        return x if all(a is b for a, b in zip(items, x)) else type(x)(items)
    return x


def torch_persistent_save(obj, filename, async_write=False):
    obj = plain_numbers(obj)
    if async_write or not _local(filename):
        return _fairseq["torch_persistent_save"](obj, filename, async_write=async_write)
    write_atomically(filename, lambda f: torch.save(obj, f))
    history = (obj.get("optimizer_history") or [{}]) if isinstance(obj, dict) else [{}]
    SAVED[filename] = history[-1].get("num_updates")


class CheckpointPathManager(PathManager):
    """fairseq's PathManager, as checkpoint_utils sees it: ``copy`` (the save's extra names)
    writes a temporary copy and renames it into place."""

    @staticmethod
    def copy(src_path, dst_path, overwrite=False):
        if not _local(src_path, dst_path):
            return PathManager.copy(src_path, dst_path, overwrite=overwrite)
        if os.path.exists(dst_path) and not overwrite:
            return False
        with open(src_path, "rb") as src:
            write_atomically(dst_path, lambda f: shutil.copyfileobj(src, f, 16 << 20))
        SAVED[dst_path] = SAVED.get(src_path)
        return True


# ----------------------------------------------------------------------------- reading
# what a pickled numpy number refers to (numpy 2 moved ``core`` to ``_core``): data, not code
_multiarray = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray
NUMPY_SCALARS = [_multiarray.scalar, np.dtype, *dict.fromkeys(type(np.dtype(c)) for c in "?bhilqBHILQefd")]


WEIGHTS_ONLY_REFUSES = "torch's weights_only loading refuses"


def torch_file_problem(path):
    """``(zipped, reason)``: what makes ``path`` no whole torch file by its bytes (empty, another
    format, a zip cut short), else None; ``zipped``: torch's zip format, not an old bare pickle."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(4)
            f.seek(max(0, size - (1 << 16) - 22))
            tail = f.read()
    except OSError as e:
        return False, e.strerror
    if size == 0:
        return False, "an empty file"
    zipped = head == b"PK\x03\x04"  # torch's format; older torch wrote a bare pickle (b"\x80...")
    if not zipped and not head.startswith(b"\x80"):
        return False, f"not a torch file ({size:,} bytes starting {head!r})"
    if zipped and b"PK\x05\x06" not in tail:  # a whole zip file ends with this record (and a comment)
        return True, f"truncated: {size:,} bytes without the zip directory that ends a whole file"
    return zipped, None


def _load(path):
    """``(state, None)`` for a fairseq checkpoint torch loads, ``(None, reason)`` otherwise.
    Reads the zip directory and the pickle, memory-mapping the tensors (cheap at any size)."""
    zipped, reason = torch_file_problem(path)
    if reason is not None:
        return None, reason
    try:
        with torch.serialization.safe_globals(NUMPY_SCALARS):
            try:
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=zipped)
            except Exception:  # noqa: BLE001  (mmap fails vaguely on a damaged file: read it to say why)
                if not zipped:
                    raise
                state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001  (whatever torch raises, said in one line)
        refused = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        if refused:
            return None, f"{WEIGHTS_ONLY_REFUSES} the {refused.group(1)} in it"
        return None, f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0].split('. ')[0][:200]}"
    if not isinstance(state, dict) or "model" not in state:
        return None, "a torch file, but not a fairseq checkpoint (no 'model' entry)"
    return state, None


def inspect(path):
    """``(num_updates, None)`` for a loadable checkpoint, ``(None, reason)`` otherwise."""
    state, reason = _load(path)
    if reason is not None:
        return None, reason
    history = state.get("optimizer_history") or [{}]
    return int(history[-1].get("num_updates") or 0), None


def read(path):
    """A checkpoint's state with its tensors memory-mapped (for reading its cfg);
    ``CheckpointError`` if it cannot be read."""
    state, reason = _load(path)
    if reason is not None:
        raise CheckpointError(unreadable(path, reason))
    return state


def newest_intact(directory, besides):
    """``(path, num_updates)`` of the loadable ``checkpoint*.pt`` in ``directory`` (other than
    ``besides``) with the most updates, the newest file among equals; None if there is none."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(directory), "checkpoint*.pt")):
        if os.path.abspath(path) != os.path.abspath(besides):
            updates, _ = inspect(path)
            if updates is not None:
                # among equals a numbered file reads better than checkpoint_best.pt, a copy of it
                found.append((updates, "checkpoint_best" not in path, os.path.getmtime(path), path))
    if not found:
        return None
    updates, *_, path = max(found)
    return path, updates


def unreadable(path, reason):
    """The one-line error for a checkpoint that cannot be read."""
    if reason.startswith(WEIGHTS_ONLY_REFUSES):
        # a whole file that holds objects other than tensors and plain data (a stock fairseq 0.12
        # checkpoint's argparse.Namespace): nothing to delete or replace
        return (f"checkpoint {path} cannot be loaded ({reason}): not a checkpoint of this plugin's, "
                "but of another program or an older fairseq")
    message = f"checkpoint {path} is unreadable ({reason})"
    intact = newest_intact(os.path.dirname(path) or ".", besides=path)
    last = os.path.basename(path).startswith("checkpoint_last")
    if intact is None:
        return message + ("; no intact checkpoint beside it: delete it to train from the start" if last else "")
    other, updates = intact
    if last:
        return (f"{message}; the newest intact checkpoint there is {other} (update {updates}): "
                f"`cp {other} {path}` and rerun the same command to resume from it")
    return f"{message}; the newest intact checkpoint beside it is {other} (update {updates})"


def load_checkpoint_to_cpu(path, arg_overrides=None, load_on_all_ranks=False):
    LOADING["path"] = path  # fairseq passes the model's load_state_dict the state, not the file
    try:
        return _fairseq["load_checkpoint_to_cpu"](path, arg_overrides, load_on_all_ranks)
    except Exception:
        if _local(path) and os.path.isdir(path):  # (a save dir given as --path: IsADirectoryError)
            intact = newest_intact(path, besides="")
            raise CheckpointError(f"checkpoint {path} is a directory: name a checkpoint file" + (
                f" (the newest intact one in it: {intact[0]})" if intact else "")) from None
        if not (_local(path) and os.path.isfile(path)):
            raise
        _, reason = inspect(path)
        if reason is None:  # the file is fine: not ours to explain
            raise
        raise CheckpointError(unreadable(path, reason)) from None


def load_model_ensemble_and_task(filenames, *args, **kwargs):
    """fairseq's, with a checkpoint that is not there (fairseq-generate's, -interactive's
    --path) one line naming it instead of fairseq's IOError traceback."""
    try:
        return _fairseq["load_model_ensemble_and_task"](filenames, *args, **kwargs)
    except OSError as e:
        missing = re.fullmatch(r"Model file not found: (.*)", str(e), re.DOTALL)
        if missing is None:
            raise
        raise InputNotFound(f"checkpoint not found: {missing.group(1)}") from None


# ----------------------------------------------------------------------------- starting training
def restart_problem(cfg, suffix, model=None, run=None):
    """What stops training before fairseq loads anything: the one-line error, or None. Includes
    what ``model.dictionary_mismatch`` says of the checkpoint's weights: fairseq's trainer would
    replace an error raised while loading them by "please ensure that the architectures match".
    ``run``: (task, criterion class) of this run, for a checkpoint of another run to resume."""
    combined = finetune_combination(cfg)
    if combined:
        return combined
    resume = "--restore-file"
    if cfg.restore_file == "checkpoint_last.pt":  # fairseq's default: resume if it is there
        path = os.path.join(cfg.save_dir, f"checkpoint_last{suffix}.pt")
        resume = "--save-dir"
        if not os.path.exists(path):  # a first launch: from --finetune-from-model, if given
            resume = None
            path = cfg.finetune_from_model
            if path is None or not _local(path):
                return None
            if not os.path.exists(path):
                return f"--finetune-from-model {path}: no such file"
    else:
        path = cfg.restore_file.replace(".pt", suffix + ".pt")
        if not _local(path):
            return None
        if not os.path.exists(path):
            there = os.path.join(cfg.save_dir, path)
            hint = (f" (relative paths start from the current directory, not --save-dir: "
                    f"--restore-file {there})" if not os.path.isabs(path) and os.path.exists(there) else "")
            return f"--restore-file {path}: no such file{hint}; fairseq would train from random weights"
    state, reason = _load(path)
    if reason is not None:
        return unreadable(path, reason)
    for check in ("dictionary_mismatch", "architecture_mismatch"):  # the model's own words, not fairseq's
        mismatch = getattr(model, check)(state["model"], path) if hasattr(model, check) else None
        if mismatch:
            return mismatch
    if resume and run is not None and not cfg.reset_optimizer:
        return other_run(state, path, resume, *run)
    return None


def finetune_combination(cfg):
    """The one-line error for flags fairseq refuses beside --finetune-from-model (the recipes'
    --checkpoint), else None: its ValueError traceback (with the whole config for --restore-file)."""
    if cfg.finetune_from_model is None:
        return None
    given = f"--finetune-from-model {cfg.finetune_from_model} (the fine-tuning recipes' --checkpoint)"
    if cfg.restore_file != "checkpoint_last.pt":
        return (f"--restore-file {cfg.restore_file} and {given} cannot be given together: --restore-file "
                "resumes a run, --finetune-from-model starts one from a model's weights; give one of them")
    resets = [f"--reset-{n}" for n in ("optimizer", "lr-scheduler", "meters", "dataloader")
              if getattr(cfg, "reset_" + n.replace("-", "_"))]
    if resets:
        return (f"{' '.join(resets)} and {given} cannot be given together: a run from --finetune-from-model "
                "starts with all of them reset already, and resumes its --save-dir's checkpoint_last.pt whole")
    return None


def other_run(state, path, resume, task, criterion):
    """The one-line error for resuming a checkpoint of another task's run (a fine-tuned one
    given to pre-training, say): fairseq's trainer stops on an assertion, "Criterion does not
    match"; None if the criteria agree."""
    theirs = (state.get("optimizer_history") or [{}])[-1].get("criterion_name")
    if theirs in (None, criterion):
        return None
    was = ((state.get("cfg") or {}).get("task") or {}).get("_name", "?")
    run = f"is a checkpoint of another run (task {was}, {theirs}; this one: task {task}, {criterion})"
    if resume == "--save-dir":
        return f"{path} {run}, and fairseq resumes the --save-dir's checkpoint_last.pt: choose another --save-dir"
    return f"--restore-file {path} {run}: to start from its weights, give it as --finetune-from-model"


@contextlib.contextmanager
def save_dir_kept_only_if_used(save_dir):
    """fairseq-train makes --save-dir before it sets the task up: a run that stops on bad input
    (one line, errors.py) left an empty directory behind. One it made and left empty is removed."""
    made = bool(save_dir) and not os.path.exists(save_dir)
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):  # not empty (a save happened), or already gone
                os.rmdir(save_dir)
        raise


def remove_leftovers(save_dir):
    """The partial files of writes a kill interrupted (only this run writes in its save dir)."""
    for tmp in glob.glob(os.path.join(glob.escape(save_dir), "checkpoint*.pt.tmp")):
        with contextlib.suppress(OSError):
            os.remove(tmp)
            logger.info(f"removed {tmp}, left by an interrupted checkpoint write")


VALID_METERS = ("wps", "wpb", "bsz", "num_updates")  # what fairseq logs with every criterion's validation


def half_precision_problem(common):
    """fairseq-train --fp16 on a machine without CUDA: its FP16Optimizer places the flattened fp32
    copy with ``torch.cuda.current_device()`` (a traceback; ``--fp16-no-flatten-grads`` and
    ``--memory-efficient-fp16`` run on a CPU). The recipes refuse it before they start fairseq-train
    (``device_flags``, common.sh); this is the same line for fairseq-train itself."""
    flattened = common.fp16 and not common.memory_efficient_fp16 and not common.fp16_no_flatten_grads
    if flattened and not torch.cuda.is_available():
        return "--fp16 needs a CUDA GPU and this machine has none: leave it out (on a CPU with bf16: --bf16-autocast)"
    return None


def load_checkpoint(cfg, trainer, **passthrough_args):
    problem = None
    if trainer.data_parallel_rank == 0:
        criterion = trainer.get_criterion()
        problem = restart_problem(cfg, trainer.checkpoint_suffix, trainer.get_model(),
                                  run=(trainer.cfg.task._name, type(criterion).__name__))
        if (problem is None and hasattr(criterion, "unlogged_metric") and not trainer.cfg.dataset.disable_validation
                and cfg.best_checkpoint_metric not in VALID_METERS):
            problem = criterion.unlogged_metric(cfg.best_checkpoint_metric)  # else the first validation fails
        if problem is None:
            problem = half_precision_problem(trainer.cfg.common)
        if problem is None and not cfg.no_save:
            remove_leftovers(cfg.save_dir)
    if trainer.data_parallel_world_size > 1:  # every rank stops, not rank 0 alone
        problem = distributed_utils.broadcast_object(problem, src_rank=0, group=trainer.data_parallel_process_group,
                                                     dist_device=trainer.device)
    if problem is not None:
        raise CheckpointError(problem)
    extra_state, epoch_itr = _fairseq["load_checkpoint"](cfg, trainer, **passthrough_args)
    max_update = trainer.cfg.optimization.max_update
    if extra_state is not None and max_update and trainer.get_num_updates() >= max_update:
        logger.info(f"pmlm: the checkpoint is at update {trainer.get_num_updates()}, --max-update is {max_update}: "
                    f"nothing to train (a larger --max-update continues it)")
        raise SystemExit(0)
    return extra_state, epoch_itr


def broadcast_object_slow(obj, src_rank, group, dist_device):
    """fairseq's ``_broadcast_object_slow``, loading with ``weights_only=False`` (see the docstring)."""
    if distributed_utils.get_rank(group) == src_rank:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        data = torch.ByteTensor(buffer.getbuffer()).to(dist_device)
        distributed_utils.broadcast(torch.LongTensor([len(data)]).to(dist_device), src=src_rank, group=group)
        distributed_utils.broadcast(data, src=src_rank, group=group)
        return obj
    length = torch.LongTensor([0]).to(dist_device)
    distributed_utils.broadcast(length, src=src_rank, group=group)
    data = torch.ByteTensor(int(length.item())).to(dist_device)
    distributed_utils.broadcast(data, src=src_rank, group=group)
    return torch.load(io.BytesIO(data.cpu().numpy()), map_location="cpu", weights_only=False)


# fairseq's own functions, kept on its module: a second import of the plugin wraps them, not ours
_fairseq = checkpoint_utils.__dict__.setdefault("_pmlm_originals", {
    name: getattr(checkpoint_utils, name) for name in ("torch_persistent_save", "load_checkpoint_to_cpu",
                                                       "load_checkpoint", "load_model_ensemble_and_task")})
checkpoint_utils.torch_persistent_save = torch_persistent_save
checkpoint_utils.PathManager = CheckpointPathManager
checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu
checkpoint_utils.load_checkpoint = load_checkpoint
checkpoint_utils.load_model_ensemble_and_task = load_model_ensemble_and_task
distributed_utils._broadcast_object_slow = broadcast_object_slow
