"""Bad input to a data-parallel launch: a clear one-line error within a bounded time, never a
hang. Mistakes visible in one rank's command line or environment, the rendezvous timeouts and
the cross-rank command-line check run in-process (each fails before anything is trained); ranks
that disagree on the world size run as two real processes, with their environment set by hand
as torchrun would set it.
"""
import contextlib
import io
import os
import subprocess
import sys
import time
import types

import pytest

from fairseq_pmlm.runtime import distributed_train

from cli import ENV, REPO, free_port, submit


def rank_env(rank, world_size, port):
    return {"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def launch(*ranks, timeout=180):
    """Start one process per (env, argv) at once, as separate ranks; returns their
    (returncode, stderr, seconds) once all have exited."""
    start = time.monotonic()
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env={**os.environ, **ENV, **env}) for env, argv in ranks]
    out = []
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        out.append((p.returncode, err, time.monotonic() - start))
    return out


def last_line(stderr):
    return stderr.strip().splitlines()[-1]


# One rank's rendezvous, as the launcher's main does it after its argument checks. The
# launcher module imports only torch and errors.py at the top, so these processes load it
# without the package's __init__ and skip the ~4 s fairseq import: the ranks stop at the
# rendezvous, long before fairseq is needed.
RENDEZVOUS = """
import importlib, os, sys, types
package = os.path.dirname(os.path.dirname(sys.argv[1]))
for name, path in (("fairseq_pmlm", package), ("fairseq_pmlm.runtime", os.path.join(package, "runtime"))):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = [path]
launcher = importlib.import_module("fairseq_pmlm.runtime.distributed_train")
launcher.form_process_group("gloo", launcher.launcher_env(), 300.0)
"""


@pytest.fixture(scope="module")
def world_sizes():
    """Two ranks that disagree on WORLD_SIZE (2 and 3), started together; --pg-timeout 300:
    they must fail long before it."""
    argv = [sys.executable, "-c", RENDEZVOUS, distributed_train.__file__]
    port = free_port()
    return submit(launch, (rank_env(0, 2, port), argv), (rank_env(1, 3, port), argv))


@pytest.fixture
def torchrun_env(monkeypatch):
    for k, v in rank_env(1, 2, free_port()).items():
        monkeypatch.setenv(k, v)


def error_line(call, *args):
    """The one stderr line of ``call(*args)``, which must stop with exit status 2."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        call(*args)
    assert e.value.code == 2 and err.getvalue().count("\n") == 1, err.getvalue()
    return err.getvalue().rstrip("\n")


def exits_with(argv, *needles):
    message = error_line(distributed_train.main, [str(a) for a in argv])
    assert message.startswith("fairseq_pmlm.runtime.distributed_train: error: "), message
    assert all(n in message for n in needles), message
    return message


def test_launcher_outside_torchrun_refuses_to_train_alone(monkeypatch, tmp_path):
    for k in distributed_train.ENV_VARS:
        monkeypatch.delenv(k, raising=False)
    exits_with(["data", "--user-dir", "fairseq_pmlm"], "RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT not set",
               "torchrun")


def test_missing_user_dir_on_a_rank_is_an_error_naming_the_flag(torchrun_env, tmp_path):
    exits_with(["data", "--task", "pseudo_masked_lm", "--cpu"], "--user-dir is missing")
    exits_with(["data", "--user-dir", tmp_path / "nowhere"], f"--user-dir {tmp_path / 'nowhere'}: no such directory",
               "rank 1")


def test_world_size_flag_disagreeing_with_torchrun_is_an_error(torchrun_env):
    exits_with(["data", "--user-dir", "fairseq_pmlm", "--distributed-world-size", "4"],
               "--distributed-world-size 4 does not match WORLD_SIZE=2")


def test_pytorch_ddp_on_cpu_is_an_error_naming_the_flag(torchrun_env):
    exits_with(["data", "--user-dir", "fairseq_pmlm", "--cpu", "--ddp-backend", "pytorch_ddp"],
               "--ddp-backend pytorch_ddp", "legacy_ddp")


@pytest.mark.parametrize("rank,reason", [(0, "1/2 clients joined"), (1, "timed out")])
def test_rank_whose_rendezvous_never_completes_fails_within_the_timeout(rank, reason, monkeypatch):
    """rank 0: its peer never comes; rank 1: nothing listens at MASTER_ADDR:MASTER_PORT."""
    for k, v in rank_env(rank, 2, free_port()).items():
        monkeypatch.setenv(k, v)
    start = time.monotonic()
    message = error_line(distributed_train.form_process_group, "gloo", distributed_train.launcher_env(), 1.0)
    assert time.monotonic() - start < 30
    assert message.startswith(f"fairseq_pmlm.runtime.distributed_train: error: rank {rank}: the 2-rank process group "
                              f"did not form at 127.0.0.1:"), message
    assert "within --pg-timeout 1 s" in message and reason in message, message


def test_ranks_with_different_world_sizes_fail_at_once_naming_both(world_sizes):
    (rc0, err0, s0), (rc1, err1, s1) = world_sizes.result()
    assert rc0 != 0 and rc1 != 0 and max(s0, s1) < 60, (s0, s1)  # not the 300 s timeout
    assert last_line(err0).endswith("rank 0: WORLD_SIZE=2 here but rank 1 was started with WORLD_SIZE=3: "
                                    "start every rank with the same world size"), err0[-2000:]
    assert "rank 1: WORLD_SIZE=3 here but rank 0 was started with WORLD_SIZE=2" in last_line(err1), err1[-2000:]


@pytest.mark.parametrize("rank", [0, 1])
def test_ranks_with_different_command_lines_fail_naming_the_difference(rank, monkeypatch):
    """What each rank does with the gathered command lines (the gather itself runs in every
    good launch, test_distributed.py)."""
    argvs = [["data", "--user-dir", "u", "--lr", "1e-3"], ["data", "--user-dir", "u", "--lr", "5e-4"]]
    monkeypatch.setattr(distributed_train.dist, "get_world_size", lambda: 2)
    def all_gather_object(out, obj):
        out[:] = argvs

    monkeypatch.setattr(distributed_train.dist, "all_gather_object", all_gather_object)
    assert error_line(distributed_train.check_same_command_line, argvs[rank], rank) == (
        f"fairseq_pmlm.runtime.distributed_train: error: rank {rank}: the ranks were started with different command "
        f"lines: rank 0 has '--lr 1e-3' where rank 1 has '--lr 5e-4'")
    argvs[1] = ["data", "--lr", "1e-3"]  # a missing flag
    assert error_line(distributed_train.check_same_command_line, argvs[rank], rank).endswith(
        "rank 0 has '--user-dir u' where rank 1 has '--lr 1e-3'")
    argvs[1] = argvs[0]
    distributed_train.check_same_command_line(argvs[rank], rank)  # the same: no error


def test_plain_fairseq_train_under_torchrun_refuses_to_train_alone(monkeypatch):
    """The trap: fairseq-train with torchrun's variables on CPU forms no process group (its
    world size comes from the CUDA device count); building the model stops it instead of
    letting each process train a separate world-size-1 copy."""
    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model

    from helpers import make_dictionary

    task = types.SimpleNamespace(cfg=types.SimpleNamespace(), source_dictionary=make_dictionary())
    cfg = UniLMv2Config(encoder_layers=1, encoder_embed_dim=8, encoder_ffn_embed_dim=16, encoder_attention_heads=2)
    UniLMv2Model.build_model(cfg, task)  # no WORLD_SIZE: fine
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError) as e:
        UniLMv2Model.build_model(cfg, task)
    assert str(e.value) == (
        "WORLD_SIZE=2 is set (torchrun) but no process group was formed, so each process would train alone: "
        "launch with `torchrun ... -m fairseq_pmlm.runtime.distributed_train ARGS` (scripts/train_distributed.sh)")


def test_an_input_error_inside_training_is_one_line_after_the_process_group_took_over_the_exception_hook(tmp_path):
    """init_process_group replaces the exception hook with torch's, which buffers stderr around the
    previous hook and lost the one line when ours exited: a rank stopped with status 2 and said nothing.
    One real rank (world size 1), a data directory with no valid split."""
    (tmp_path / "dict.txt").write_text("a 1\nb 1\n")
    argv = [sys.executable, "-m", "fairseq_pmlm.runtime.distributed_train", str(tmp_path), "--user-dir",
            "fairseq_pmlm", "--task", "pseudo_masked_lm", "--arch", "unilmv2_tiny", "--batch-size", "2", "--cpu"]
    [(status, stderr, _)] = launch((rank_env(0, 1, free_port()), argv))
    assert status == 2, stderr[-3000:]
    assert last_line(stderr) == (f"fairseq_pmlm.runtime.distributed_train: error: dataset not found: "
                                 f"{tmp_path}/valid.{{bin,idx}}"), stderr[-3000:]


def test_a_flag_given_twice_is_checked_at_the_value_fairseq_reads_the_last(torchrun_env):
    # docs/PRETRAINING.md's CPU run appends to the GPU arguments: the last --ddp-backend is the one that runs
    env = distributed_train.launcher_env()
    distributed_train.check_command_line(
        ["data", "--user-dir", "fairseq_pmlm", "--ddp-backend", "pytorch_ddp", "--cpu", "--ddp-backend", "legacy_ddp"],
        env, cpu=True)
    exits_with(["data", "--user-dir", "fairseq_pmlm", "--cpu", "--ddp-backend=legacy_ddp",
                "--ddp-backend", "pytorch_ddp"], "--ddp-backend pytorch_ddp", "legacy_ddp")
