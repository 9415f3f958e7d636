"""Data-parallel pre-training through fairseq's distributed engine, on CPU (gloo): the
documented recipe (scripts/train_distributed.sh: torchrun + fairseq_pmlm.runtime.distributed_train)
starts two ranks that form ONE process group, hold identical parameters after every update,
and train exactly what one fairseq-train process trains on the same examples with a doubled
``--update-freq``; the pmlm criterion's logged numbers sum across ranks to the single-process
values.

Both runs load tests/replica_probe as a second --user-dir: it only records, after every
update, each rank's parameters, rank, world size and example ids. Two ranks x batch 4 x
update-freq 2 and one process x batch 4 x update-freq 4 consume the same 4 batches per update:
fairseq gives rank r batches r, r+2, ... of the (identically shuffled) epoch and groups
consecutive ones. Dropout 0 and one seed, so the only difference left is the order of fp32
summation.
"""
import os
import subprocess

import pytest
import torch

from cli import BIN, ENV, REPO, free_port, records, shared_corpus, submit, train_args

UPDATES = 6  # 64 examples / 16 per update = 4 updates an epoch: crosses into epoch 2
COMMON = ["--batch-size", "4", "--max-update", str(UPDATES), "--log-interval", "1", "--dropout", "0",
          "--attention-dropout", "0", "--no-save", "--user-dir", os.path.join(REPO, "tests", "replica_probe")]


def probe_run(out, *cmd):
    out.mkdir()
    proc = subprocess.run([*map(str, cmd)], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, **ENV, "PROBE_OUT": str(out)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, {int(f[4:-3]): torch.load(out / f) for f in os.listdir(out)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    data = shared_corpus(tmp_path_factory)
    root = tmp_path_factory.mktemp("distributed")
    recipe = ["bash", os.path.join(REPO, "scripts", "train_distributed.sh"), "--nproc", "2",
              "--master", f"127.0.0.1:{free_port()}", "--rdzv-timeout", "60", "--"]
    dist = submit(probe_run, root / "dist", *recipe,
                  *train_args(data, root / "dist_ckpt", *COMMON, "--update-freq", "2", "--pg-timeout", "60"))
    single = submit(probe_run, root / "single", os.path.join(BIN, "fairseq-train"),
                    *train_args(data, root / "single_ckpt", *COMMON, "--update-freq", "4"))
    return {"dist": dist.result(), "single": single.result()}


def test_torchrun_ranks_form_one_process_group_of_world_size_2(runs):
    proc, ranks = runs["dist"]
    assert sorted(ranks) == [0, 1]
    for r, updates in ranks.items():
        assert [u["update"] for u in updates] == list(range(1, UPDATES + 1))
        assert {(u["rank"], u["world_size"]) for u in updates} == {(r, 2)}, "fairseq's trainer saw another world"
        assert f"rank {r} of world size 2: process group formed (gloo, 127.0.0.1:" in proc.stdout
    assert "training on 2 devices" in proc.stdout
    # and the single-process reference really was one process
    assert {(u["rank"], u["world_size"]) for u in runs["single"][1][0]} == {(0, 1)}


def test_ranks_train_disjoint_halves_of_the_single_process_examples(runs):
    rank0, rank1 = runs["dist"][1][0], runs["dist"][1][1]
    for a, b, one in zip(rank0, rank1, runs["single"][1][0]):
        assert len(a["ids"]) == len(b["ids"]) == 8 and not set(a["ids"]) & set(b["ids"]), a["update"]
        assert sorted(a["ids"] + b["ids"]) == one["ids"], a["update"]


def test_parameters_are_identical_across_ranks_after_every_update(runs):
    rank0, rank1 = runs["dist"][1][0], runs["dist"][1][1]
    before = None
    for a, b in zip(rank0, rank1):
        assert torch.equal(a["params"], b["params"]), f"ranks differ after update {a['update']}"
        assert before is None or not torch.equal(before, a["params"]), "the parameters did not move"
        before = a["params"]


def test_two_ranks_equal_one_process_with_doubled_update_freq(runs):
    rank0, one = runs["dist"][1][0], runs["single"][1][0]
    for a, b in zip(rank0, one):
        diff = (a["params"] - b["params"]).abs().max().item()
        # fp32: the same sums in another order (measured: 6e-7 after 6 updates with lr 2e-3)
        assert diff < 1e-5, (a["update"], diff)


@pytest.mark.parametrize("tag", ["train_inner", "train", "valid"])
def test_pmlm_logged_losses_and_accuracies_sum_across_ranks_like_one_process(tag, runs):
    dist, one = records(runs["dist"][0], tag), records(runs["single"][0], tag)
    assert len(dist) == len(one) == {"train_inner": UPDATES, "train": 2, "valid": 2}[tag]
    prefix = "" if tag == "train_inner" else f"{tag}_"
    for a, b in zip(dist, one):
        # counts and accuracies are sums of integers: exact; losses are fp32 sums printed
        # with 3 decimals: equal up to the last digit's rounding
        for key in ("masked", "bsz", "wpb", "ae_acc", "par_acc"):
            assert a[prefix + key] == b[prefix + key], (tag, key, a, b)
        for key in ("loss", "ae_loss", "par_loss"):
            assert abs(float(a[prefix + key]) - float(b[prefix + key])) <= 0.0011, (tag, key, a, b)


@pytest.mark.parametrize("sig,status,name", [("SIGINT", 130, "SIGTERM"), ("SIGUSR1", 138, "SIGUSR1")])
def test_a_signal_to_the_recipes_process_group_saves_on_every_rank_and_leaves_no_rank_running(
        tmp_path_factory, tmp_path, sig, status, name):
    """torchrun starts its ranks in sessions of their own and passes on INT and TERM only. Ctrl-C
    (SIGINT to the group) used to stop each rank mid-collective (KeyboardInterrupt, no save, status 1);
    SIGUSR1 ended torchrun and left both ranks training to the end. Now: every rank saves at the same
    update, the one line, the signal's status, no process left."""
    import signal
    import time

    data = shared_corpus(tmp_path_factory)
    save = tmp_path / "ckpt"
    proc = subprocess.Popen(["bash", os.path.join(REPO, "scripts", "train_distributed.sh"), "--nproc", "2",
                             "--master", f"127.0.0.1:{free_port()}", "--rdzv-timeout", "60", "--",
                             *map(str, train_args(data, save, "--max-update", "100000", "--pg-timeout", "60"))],
                            cwd=REPO, env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    lines = []
    for line in proc.stdout:  # until training runs: an update logged
        lines.append(line)
        if "num_updates" in line:
            break
    os.killpg(proc.pid, getattr(signal, sig))
    start = time.monotonic()
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == status, out[-3000:]
    assert time.monotonic() - start < 60, out[-3000:]
    assert f"pmlm: {name} received: saved {save}/checkpoint_last.pt at update " in out, out[-3000:]
    assert "KeyboardInterrupt" not in out
    ranks = subprocess.run(["pgrep", "-f", str(save)], capture_output=True, text=True).stdout.split()
    assert ranks == [], ranks
