"""Training runs that get killed, for test_preemption.py and test_one_line_errors.py (cli.drive runs
it): ``python tests/kill_driver.py PLANS.json``.

One process imports fairseq and the plugin once, then runs each plan in a forked child (a run
costs about a second instead of ~4 s of imports), one after the other; a plan with a world
size of 2 forks two ranks of ``fairseq_pmlm.runtime.distributed_train``. A child's output goes to its
plan's log file (rank r > 0: ``LOG.rank{r}``). A plan::

    {"argv": [...fairseq-train arguments...], "log": PATH, "save_dir": DIR,
     "fault": null or {"signal": "KILL" | "TERM" | "USR1", "at": POINT, ...}
              or {"errno": "ENOSPC", "at": "write", "n": N} (that fsync fails, as on a full disk),
     "world_size": 1, "fault_rank": 0, "prepare": [STEP, ...]}

STEP, done by the driver before the run: ``{"to": DIR, "mkdir": true}``, ``{"to": PATH, "copy": PATH}``
(``"keep": 0.5``: only the first half of it) or ``{"to": PATH, "hex": "..."}`` (these bytes).

POINT, counted within the run:
- ``write``, ``n``, ``frac``: the n-th fsync of a regular file, i.e. the end of writing one
  checkpoint file (or copy) to its temporary name; with KILL the file is first cut to ``frac``
  of its length: a kill in the middle of writing it;
- ``replace``, ``n``, ``after``: just before (after) the n-th ``os.replace``: the temporary file
  is whole but not yet renamed (is renamed, the rest of the save not done);
- ``time``, ``n``, ``seconds``: that long after the run's n-th update started: anywhere (kept
  short and early, so the kill lands before even a run with a few updates left has finished);
- ``update``, ``n``: right after the n-th update of the run, before fairseq validates or saves.

Each plan's result, one JSON line on stdout: the exit status (a negative signal number for a
killed child), where a ``time`` fault landed ("inside a save" or "between saves") and, for
every ``checkpoint*.pt`` in the save dir afterwards, its update count or why it is unreadable.
"""
import errno
import json
import os
import signal
import stat
import sys
import threading
import time

import torch
from fairseq import checkpoint_utils
from fairseq.trainer import Trainer
from fairseq_cli.train import cli_main

from fairseq_pmlm.runtime import distributed_train
from fairseq_pmlm.runtime.checkpoint_files import inspect

from cli import free_port  # tests/ is this script's directory, so on its path


def arm(fault, marker):
    """Install the fault in this (child) process."""
    sig = getattr(signal, "SIG" + fault["signal"]) if fault.get("signal") else None
    at, n = fault["at"], fault.get("n", 1)
    state = {"count": 0, "in_save": False}

    def fire(where):
        with open(marker, "w") as f:
            f.write(where)
        os.kill(os.getpid(), sig)

    def nth():
        state["count"] += 1
        return state["count"] == n

    if at == "write":
        real_fsync = os.fsync

        def fsync(fd):
            if stat.S_ISREG(os.fstat(fd).st_mode) and nth():
                if fault.get("errno"):
                    code = getattr(errno, fault["errno"])
                    raise OSError(code, os.strerror(code))
                if sig == signal.SIGKILL:
                    os.ftruncate(fd, int(os.fstat(fd).st_size * fault["frac"]))
                fire("inside a save")
            return real_fsync(fd)

        os.fsync = fsync
    elif at == "replace":
        real_replace = os.replace

        def replace(src, dst):
            if nth() and not fault.get("after"):
                fire("inside a save")
            real_replace(src, dst)
            if state["count"] == n and fault.get("after"):
                fire("inside a save")

        os.replace = replace
    elif at in ("time", "update"):
        real_step, real_save = Trainer.train_step, checkpoint_utils.save_checkpoint

        def train_step(self, *args, **kwargs):
            if at == "time" and state["count"] == n - 1:
                timer = threading.Timer(fault["seconds"], lambda: fire(
                    "inside a save" if state["in_save"] else "between saves"))
                timer.daemon = True
                timer.start()
            out = real_step(self, *args, **kwargs)
            if nth() and at == "update":  # (for "time", nth() only counts the updates)
                fire("between saves")
            return out

        def save_checkpoint(*args, **kwargs):  # fairseq reads .best off whatever is the module's
            state["in_save"] = True
            try:
                return real_save(*args, **kwargs)
            finally:
                state["in_save"] = False

        Trainer.train_step = train_step
        checkpoint_utils.save_checkpoint = save_checkpoint


def child(plan, rank, port):
    log = plan["log"] + (f".rank{rank}" if rank else "")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    world_size = plan.get("world_size", 1)
    if world_size > 1:
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if plan.get("fault") and rank == plan.get("fault_rank", 0):
        arm(plan["fault"], plan["log"] + ".where")
    code = 0
    try:
        if world_size > 1:
            distributed_train.main(plan["argv"])
        else:
            sys.argv = ["fairseq-train", *plan["argv"]]
            cli_main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001  (printed as the interpreter would: through sys.excepthook)
        code = 1
        try:
            sys.excepthook(*sys.exc_info())
        except SystemExit as e:  # the plugin's hook: a one-line error exits 2
            code = e.code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def prepare(steps):
    for step in steps:
        if step.get("mkdir"):
            os.makedirs(step["to"], exist_ok=True)
            continue
        if "copy" in step:
            with open(step["copy"], "rb") as f:
                data = f.read()
            data = data[: int(len(data) * step["keep"])] if step.get("keep") is not None else data
        else:
            data = bytes.fromhex(step["hex"])
        with open(step["to"], "wb") as f:
            f.write(data)


def warm_up(argv):
    """What every run would do first in a fresh process (~2 s): torch's optimizer imports
    torch._dynamo, fairseq composes its config with Hydra. Once here, inherited by each fork."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))


def main():
    torch.set_num_threads(1)
    plans = json.load(open(sys.argv[1]))
    warm_up(plans[0]["argv"])
    for plan in plans:
        prepare(plan.get("prepare", []))
        port, start = free_port(), time.monotonic()
        sys.stdout.flush()
        pids = []
        for rank in range(plan.get("world_size", 1)):
            pid = os.fork()
            if pid == 0:
                child(plan, rank, port)
            pids.append(pid)
        statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
        seconds = round(time.monotonic() - start, 2)
        marker = plan["log"] + ".where"
        where = open(marker).read() if os.path.exists(marker) else None
        save_dir = plan.get("save_dir")
        files = {}
        if save_dir and os.path.isdir(save_dir):
            for name in sorted(os.listdir(save_dir)):
                if name.startswith("checkpoint"):
                    updates, reason = inspect(os.path.join(save_dir, name)) if name.endswith(".pt") else (None, "tmp")
                    files[name] = updates if reason is None else reason
        print(json.dumps({"status": statuses, "where": where, "files": files, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
