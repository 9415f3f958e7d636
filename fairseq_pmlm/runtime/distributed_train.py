"""``python -m fairseq_pmlm.runtime.distributed_train ARGS``: ``fairseq-train ARGS`` as one rank of a
data-parallel job started by ``torchrun`` (or by anything that sets torchrun's variables
RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), on GPUs or on CPUs.

Why this exists: fairseq 0.12 cannot turn torchrun's environment into one process group on
its own. Without ``--distributed-world-size`` it takes the world size from the CUDA device
count (1 on a CPU machine, or with one visible GPU per process) and silently trains WORLD_SIZE
independent copies; with it, it computes the device as ``RANK % cuda.device_count()``
(ZeroDivisionError on CPU); its own single-node spawn asserts CUDA devices; and a rank whose
peers never arrive waits torch's default 30 minutes. Here the rank, world size and device
come from the environment, the backends default to ones that work on the hardware (gloo and
legacy_ddp on CPU), the process group is formed with a timeout (``--pg-timeout``), every rank
checks that all ranks run the same command line, and then fairseq's own ``train.main`` runs:
its ``distributed_init`` finds the group already formed and uses it.

The other half is ``process_group_guard.py``: the model calls it, so that a plain
``fairseq-train`` under torchrun that formed no group stops instead of training alone.
This module imports only torch and the plain-Python ``errors.py`` at the top (tests load it
without the package's ``__init__``, so without fairseq).
"""
import datetime
import logging
import os
import signal
import sys
import warnings

import torch
import torch.distributed as dist

from ..errors import exit_with_error, one_line_of

PROG = "fairseq_pmlm.runtime.distributed_train"
ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
logger = logging.getLogger(PROG)


def given(argv, flag):
    """Whether ``flag`` is on the command line (as ``--flag value`` or ``--flag=value``)."""
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def flag_value(argv, flag):
    """The value fairseq-train reads for ``flag``: the last one given, as argparse takes it."""
    value = None
    for i, a in enumerate(argv):
        if a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        elif a == flag and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def launcher_env():
    """torchrun's variables as a dict; a clear error if any is missing (not under torchrun,
    the silent world-size-1 trap: refuse rather than train alone)."""
    missing = [v for v in ENV_VARS if v not in os.environ]
    if missing:
        exit_with_error(PROG, f"{', '.join(missing)} not set: start it with torchrun (see "
                              f"scripts/train_distributed.sh) or set {', '.join(ENV_VARS)} for every rank")
    try:
        env = {v: os.environ[v] if v == "MASTER_ADDR" else int(os.environ[v]) for v in ENV_VARS}
    except ValueError:
        exit_with_error(PROG, f"{', '.join(ENV_VARS[:3] + ENV_VARS[4:])} must be integers")
    if not 0 <= env["RANK"] < env["WORLD_SIZE"]:
        exit_with_error(PROG, f"RANK={env['RANK']} is not in [0, WORLD_SIZE={env['WORLD_SIZE']})")
    return env


def check_command_line(argv, env, cpu):
    """Mistakes that would otherwise surface as a hang, a deadlock or a silently different run."""
    user_dir = flag_value(argv, "--user-dir")
    if user_dir is None:
        exit_with_error(PROG, "--user-dir is missing: every rank must load the plugin (--user-dir <path to "
                              "fairseq_pmlm>), and checkpoints record it")
    if not os.path.isdir(user_dir):
        exit_with_error(PROG, f"--user-dir {user_dir}: no such directory on this node (rank {env['RANK']})")
    asked = flag_value(argv, "--distributed-world-size")
    if asked is not None and asked != str(env["WORLD_SIZE"]):
        exit_with_error(PROG, f"--distributed-world-size {asked} does not match WORLD_SIZE={env['WORLD_SIZE']} "
                              f"(the number of processes the launcher started); drop the flag or make them agree")
    if cpu and flag_value(argv, "--ddp-backend") in ("pytorch_ddp", "c10d"):
        # fairseq hands device_ids=[device_id] to torch's DDP, which rejects it for CPU modules
        exit_with_error(PROG, "--ddp-backend pytorch_ddp needs GPUs in fairseq; use --ddp-backend legacy_ddp on CPU")


def form_process_group(backend, env, timeout_s):
    """The env:// rendezvous, a world-size agreement, then ``init_process_group`` on that store,
    all with a deadline: a rank that cannot reach MASTER_ADDR:MASTER_PORT or peers that never
    come fail after ``timeout_s`` (and, on gloo, so does every later collective) instead of
    waiting torch's 30 minutes; ranks started with different WORLD_SIZE fail at once, naming
    both values, instead of timing out in gloo's connection mesh."""
    where = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    rank, world_size = env["RANK"], env["WORLD_SIZE"]
    timeout = datetime.timedelta(seconds=timeout_s)
    try:
        # torch's own env:// handler: under torchrun it joins the agent's store
        store, _, _ = next(dist.rendezvous("env://", rank=rank, world_size=world_size, timeout=timeout))
        store.set(f"fairseq_pmlm/world_size/{rank}", str(world_size))
        peers = range(1, world_size) if rank == 0 else [0]
        store.wait([f"fairseq_pmlm/world_size/{r}" for r in peers], timeout)
        theirs = {r: int(store.get(f"fairseq_pmlm/world_size/{r}")) for r in peers}
        # rank 0 hosts the store: it waits until the others have read it, so that a rank that
        # fails here does not take the store away from one that has yet to see the mismatch
        store.set(f"fairseq_pmlm/read/{rank}", "1")
        if rank == 0:
            store.wait([f"fairseq_pmlm/read/{r}" for r in peers], timeout)
        for r, size in theirs.items():
            if size != world_size:
                exit_with_error(PROG, f"rank {rank}: WORLD_SIZE={world_size} here but rank {r} was started with "
                                      f"WORLD_SIZE={size}: start every rank with the same world size")
        dist.init_process_group(backend=backend, store=store, world_size=world_size, rank=rank, timeout=timeout)
    except Exception as e:  # DistStoreError, DistNetworkError, RuntimeError from gloo/nccl
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        exit_with_error(PROG, f"rank {rank}: the {world_size}-rank process group did not form at {where} "
                              f"within --pg-timeout {timeout_s:g} s ({reason})")
    logger.info(f"rank {dist.get_rank()} of world size {dist.get_world_size()}: process group formed "
                f"({backend}, {where})")


def check_same_command_line(argv, rank):
    """All ranks must train the same thing; a rank with another command line (a missing flag,
    another data directory) would otherwise deadlock or silently diverge."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, list(argv))
    first = everyone[0]
    for r, other in enumerate(everyone):
        if other != first:
            i = next(i for i, (a, b) in enumerate(zip(first + [None], other + [None])) if a != b)
            if i > 0 and not any(x[i].startswith("-") for x in (first, other) if i < len(x)):
                i -= 1  # a differing value: show its flag too
            exit_with_error(PROG, f"rank {rank}: the ranks were started with different command lines: rank 0 has "
                                  f"{' '.join(first[i:i + 2]) or '(end)'!r} where rank {r} has "
                                  f"{' '.join(other[i:i + 2]) or '(end)'!r}")


def main(argv=None):
    from fairseq import options  # fairseq only here (see the module docstring)
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli import train as fairseq_train

    argv = list(sys.argv[1:] if argv is None else argv)
    env = launcher_env()
    cpu = given(argv, "--cpu") or not torch.cuda.is_available()
    check_command_line(argv, env, cpu)  # before parsing: parsing imports --user-dir
    # fairseq-train's log format (fairseq_cli.train sets it up only as the entry point)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S",
                        level=os.environ.get("LOGLEVEL", "INFO").upper(), stream=sys.stdout, force=True)
    parser = options.get_training_parser()
    parser.add_argument_group(PROG).add_argument(
        "--pg-timeout", type=float, default=1800, metavar="SECONDS",
        help="give up forming the process group (and, on gloo, any collective) after this long")
    args = options.parse_args_and_arch(parser, input_args=argv)
    if not args.pg_timeout > 0:
        exit_with_error(PROG, f"--pg-timeout must be positive (got {args.pg_timeout:g})")

    cfg = convert_namespace_to_omegaconf(args)
    d = cfg.distributed_training
    d.distributed_world_size, d.distributed_rank = env["WORLD_SIZE"], env["RANK"]
    d.device_id = env["LOCAL_RANK"]
    d.distributed_init_method, d.distributed_no_spawn = "env://", True  # the launcher spawned us
    if not given(argv, "--distributed-backend"):
        d.distributed_backend = "gloo" if cpu else "nccl"
    if cpu and not given(argv, "--ddp-backend"):
        d.ddp_backend = "legacy_ddp"
    if not cpu:
        torch.cuda.set_device(d.device_id)  # nccl's all_gather_object uses the current device

    # Ctrl-C reaches the ranks as torchrun passes it on (it starts them in sessions of their own): taken
    # as SIGTERM, which training records and stops on, all ranks at the same update after a save
    # (preemption.py); a KeyboardInterrupt stopped each rank mid-collective, with tracebacks, no save
    signal.signal(signal.SIGINT, lambda *_: os.kill(os.getpid(), signal.SIGTERM))
    form_process_group(d.distributed_backend, env, args.pg_timeout)
    check_same_command_line(argv, env["RANK"])
    # fairseq's distributed_init would warn that the group exists: that is the point here
    warnings.filterwarnings("ignore", message="Distributed is already initialized")
    try:
        distributed_utils.call_main(cfg, fairseq_train.main)
    except Exception as e:
        # here, not in the exception hook: init_process_group replaced it with torch's, which buffers
        # stderr around ours and loses the buffer when ours exits (exit status 2, no line printed)
        line = one_line_of(e, e.__traceback__)
        if line is None:
            raise
        exit_with_error(PROG, line)


if __name__ == "__main__":
    main()
