"""Checkpoints survive any kill, SIGTERM/SIGUSR1 save and stop at an update boundary, and a
checkpoint that cannot be used stops the command with one line naming it
(fairseq_pmlm/runtime/checkpoint_files.py, fairseq_pmlm/runtime/preemption.py).

Fault injection (tests/kill_driver.py runs every training in a forked child of one process):
one run is SIGKILLed again and again, each time at a point drawn from a fixed seed: in the
middle of writing a checkpoint file or a copy of it (the file cut short first, as a kill leaves
it), just before or just after a rename, or at a random instant of training; after every kill
the same command is rerun. Every checkpoint file must load after every kill, every rerun must
resume from the ``checkpoint_last.pt`` that is there, and the last rerun must end with exactly
the parameters and optimizer state of a run that was never interrupted.

The runs are independent chains, so the module fixture starts them at once in cli.py's
two-worker pool: the kill chain, then a real fairseq-train on an unreadable checkpoint (its
whole stderr is read); and the signal, distributed and unreadable-file runs.
"""
import os
import random
import re
import shutil
import subprocess
import time

import pytest
import torch

from cli import REPO, drive, run, shared_corpus, submit, train_args

UPDATES = 36  # 4 updates an epoch; a save every 3 updates and at each epoch's end
COMMON = ["--max-update", str(UPDATES), "--save-interval-updates", "3", "--log-interval", "1"]
DIST_UPDATES = 8
SHORT = 12  # the reruns after a signal stop here: the reference's checkpoint3.pt is update 12
KILLS = 13
LOADED = re.compile(r"Loaded checkpoint (\S+) \(epoch \d+ @ (\d+) updates\)")


def kill_faults(seed=20240611):
    """SIGKILL points: inside a save (mid-write with the file cut at a random length, before or
    after a rename) and at random instants, in a shuffled order."""
    rng = random.Random(seed)
    faults = [{"at": "write", "n": rng.randint(1, 5), "frac": round(rng.uniform(0.02, 0.98), 2)} for _ in range(5)]
    faults += [{"at": "replace", "n": rng.randint(1, 5), "after": after} for after in (False, True, False, True)]
    # a random instant within the run's first updates: a resumed run may have only 3 updates left
    faults += [{"at": "time", "n": rng.randint(1, 2), "seconds": round(rng.uniform(0.0, 0.03), 3)}
               for _ in range(KILLS - len(faults))]
    rng.shuffle(faults)
    return [dict(f, signal="KILL") for f in faults]


class Plans:
    """Plans for kill_driver.py, each with its own save dir and log under ``root``."""

    def __init__(self, root, data):
        self.root, self.data, self.plans = root, data, []

    def add(self, save_dir, *extra, fault=None, world_size=1, fault_rank=0, prepare=(), updates=UPDATES):
        argv = train_args(self.data, self.root / save_dir, *COMMON, *extra)
        argv[argv.index("--max-update") + 1] = updates
        if world_size > 1:
            argv += ["--pg-timeout", "60"]
        self.plans.append({"argv": [str(a) for a in argv], "log": str(self.root / f"{len(self.plans):02d}.log"),
                           "save_dir": str(self.root / save_dir), "fault": fault, "world_size": world_size,
                           "fault_rank": fault_rank, "prepare": list(prepare)})
        return len(self.plans) - 1

    def drive(self):
        results = drive(self.plans, self.root / "plans.json", timeout=400)
        for plan, result in zip(self.plans, results):
            result["logs"] = [open(plan["log"] + (f".rank{r}" if r else "")).read() for r in range(plan["world_size"])]
        return results


def kill_chain(root, data):
    """The uninterrupted reference, then KILLS killed runs of one command and the rerun that finishes."""
    p = Plans(root, data)
    p.add("reference")
    for fault in kill_faults():
        p.add("killed", fault=fault)
    p.add("killed")
    return p.drive()


def last_line_of_cli_restart(root, data, reference):
    """A real fairseq-train rerun on a save dir whose checkpoint_last.pt was cut short."""
    save = root / "cli_truncated"
    save.mkdir()
    for name in ("checkpoint_1_3.pt", "checkpoint1.pt"):
        shutil.copy(reference / name, save / name)
    whole = (reference / "checkpoint_2_6.pt").read_bytes()
    (save / "checkpoint_last.pt").write_bytes(whole[: len(whole) // 3])
    return save, run("fairseq-train", *train_args(data, save, *COMMON), check=False)


def signal_runs(root, data):
    """SIGTERM between updates, SIGUSR1 inside a save, SIGTERM to one of two ranks, and the
    unreadable / missing checkpoint cases, each with the rerun that follows."""
    p, at = Plans(root, data), {}
    at["term"] = p.add("term", fault={"signal": "TERM", "at": "update", "n": 5})
    at["term_resumed"] = p.add("term", updates=SHORT)
    # the 4th rename is the first file of the save at update 4 (3 files were written at update 3)
    at["usr1"] = p.add("usr1", fault={"signal": "USR1", "at": "replace", "n": 4})
    at["usr1_resumed"] = p.add("usr1", updates=SHORT)
    at["finished_again"] = p.add("term", updates=SHORT)
    for name, fault in (("dist_reference", None), ("dist", {"signal": "TERM", "at": "update", "n": 5}),
                        ("dist_resumed", None)):
        at[name] = p.add(name.replace("_resumed", ""), fault=fault, world_size=2, fault_rank=1, updates=DIST_UPDATES)
    term = root / "term"
    t = root / "truncated"
    at["truncated"] = p.add("truncated", prepare=[
        {"to": str(t), "mkdir": True},
        *({"copy": str(term / n), "to": str(t / n)} for n in ("checkpoint_1_3.pt", "checkpoint_2_6.pt")),
        {"copy": str(term / "checkpoint3.pt"), "to": str(t / "checkpoint_last.pt"), "keep": 0.5}])
    at["advice_followed"] = p.add("truncated", prepare=[
        {"copy": str(t / "checkpoint_2_6.pt"), "to": str(t / "checkpoint_last.pt")}], updates=SHORT)
    for name, hex_bytes in (("empty", ""), ("garbage", "00ff" * 999)):
        at[name] = p.add(name, prepare=[{"to": str(root / name), "mkdir": True},
                                        {"hex": hex_bytes, "to": str(root / name / "checkpoint_last.pt")}])
    at["no_restore_file"] = p.add("no_restore_file", "--restore-file", root / "nowhere" / "checkpoint_9.pt")
    at["bad_finetune"] = p.add("bad_finetune", "--finetune-from-model", root / "pretrained.pt", prepare=[
        {"copy": str(term / "checkpoint3.pt"), "keep": 0.5, "to": str(root / "pretrained.pt")}])
    results = p.drive()
    return {name: results[i] for name, i in at.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    data = shared_corpus(tmp_path_factory)
    root = tmp_path_factory.mktemp("preemption")
    (root / "kills").mkdir()
    (root / "signals").mkdir()

    def kills_then_cli():
        results = kill_chain(root / "kills", data)
        return results, last_line_of_cli_restart(root, data, root / "kills" / "reference")

    jobs = {"kills": submit(kills_then_cli), "signals": submit(signal_runs, root / "signals", data)}
    return {"root": root, **jobs}


def reference(runs, name):
    """A checkpoint of the uninterrupted run (made by the kill chain's first run)."""
    runs["kills"].result()
    return runs["root"] / "kills" / "reference" / name


def state(path):
    """Every tensor of a checkpoint's model and optimizer state, by name."""
    s = torch.load(path)
    out = {f"model.{k}": v for k, v in s["model"].items()}
    for i, st in s["last_optimizer_state"]["state"].items():
        out.update({f"optimizer.{i}.{k}": v for k, v in st.items() if torch.is_tensor(v)})
    return out


def max_diff(a, b):
    sa, sb = state(a), state(b)
    assert sa.keys() == sb.keys()
    return max((sa[k].double() - sb[k].double()).abs().max().item() for k in sa)


def stderr_line(result, needle):
    lines = [line for log in result["logs"] for line in log.splitlines() if needle in line]
    assert lines, result["logs"][0][-3000:]
    return lines[0]


def test_kills_inside_saves_and_at_random_instants_always_leave_loadable_checkpoints_and_resume_exactly(runs):
    results, _ = runs["kills"].result()
    kills_dir = runs["root"] / "kills"
    reference, chain = results[0], results[1:]
    assert reference["status"] == [0] and reference["files"]["checkpoint_last.pt"] == UPDATES
    for i, (before, after) in enumerate(zip(chain, chain[1:])):
        assert before["status"] == [-9], f"run {i + 1} was not killed: {before}"
        broken = {n: v for n, v in before["files"].items() if n.endswith(".pt") and not isinstance(v, int)}
        assert not broken, f"kill {i + 1} ({before['where']}) left unreadable checkpoints: {broken}"
        resumed = LOADED.search(after["logs"][0])
        if "checkpoint_last.pt" in before["files"]:
            assert resumed, f"the rerun after kill {i + 1} did not load checkpoint_last.pt"
            assert resumed.group(1) == str(kills_dir / "killed" / "checkpoint_last.pt")
            assert int(resumed.group(2)) == before["files"]["checkpoint_last.pt"]
        else:  # killed before the first save had made checkpoint_last.pt: starts again
            assert resumed is None and "No existing checkpoint found" in after["logs"][0]
    final = chain[-1]
    assert final["status"] == [0] and final["files"]["checkpoint_last.pt"] == UPDATES
    assert not [n for n in final["files"] if n.endswith(".tmp")], "a partial file survived the reruns"
    diff = max_diff(kills_dir / "reference" / "checkpoint_last.pt", kills_dir / "killed" / "checkpoint_last.pt")
    inside = sum(r["where"] == "inside a save" for r in chain[:-1])
    print(f"{KILLS} kills: {inside} inside saves, {KILLS - inside} between; {KILLS}/{KILLS} resumed; "
          f"final parameters and optimizer state vs the uninterrupted run: max diff {diff}")
    assert inside >= 9  # the 9 faults placed inside saves, and any random instant that fell in one
    assert diff == 0


def test_unreadable_checkpoint_last_stops_fairseq_train_with_one_line_naming_the_newest_intact_one(runs):
    save, proc = runs["kills"].result()[1]
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"fairseq-train: error: checkpoint {save}/checkpoint_last.pt is unreadable (truncated: "
        f"{len((runs['root'] / 'kills' / 'reference' / 'checkpoint_2_6.pt').read_bytes()) // 3:,} bytes without "
        f"the zip directory that ends a whole file); the newest intact checkpoint there is {save}/checkpoint1.pt "
        f"(update 4): `cp {save}/checkpoint1.pt {save}/checkpoint_last.pt` and rerun the same command to resume "
        f"from it"]


def test_sigterm_saves_at_the_next_update_boundary_exits_143_and_the_rerun_resumes_exactly(runs):
    r = runs["signals"].result()
    term = runs["root"] / "signals" / "term"
    assert r["term"]["status"] == [143]
    assert stderr_line(r["term"], "pmlm: SIGTERM") == (
        f"pmlm: SIGTERM received: saved {term}/checkpoint_last.pt at update 5; rerun the same command to resume")
    # update 5 is no save point (3, 4, 6, ...): the signal made this save, of checkpoint_last.pt only
    assert [n for n, u in r["term"]["files"].items() if u == 5] == ["checkpoint_last.pt"]
    assert LOADED.search(r["term_resumed"]["logs"][0]).group(2) == "5"
    assert r["term_resumed"]["status"] == [0]
    assert max_diff(reference(runs, "checkpoint3.pt"), term / "checkpoint_last.pt") == 0


def test_sigusr1_during_a_save_lets_the_save_finish_then_stops_and_resumes_exactly(runs):
    r = runs["signals"].result()
    usr1 = runs["root"] / "signals" / "usr1"
    assert r["usr1"]["status"] == [128 + 10]
    assert stderr_line(r["usr1"], "pmlm: SIGUSR1") == (
        f"pmlm: SIGUSR1 received: saved {usr1}/checkpoint_last.pt at update 4; rerun the same command to resume")
    files = r["usr1"]["files"]
    assert files["checkpoint1.pt"] == files["checkpoint_last.pt"] == 4 and not any(n.endswith(".tmp") for n in files)
    assert LOADED.search(r["usr1_resumed"]["logs"][0]).group(2) == "4"
    assert max_diff(reference(runs, "checkpoint3.pt"), usr1 / "checkpoint_last.pt") == 0


def test_rerunning_a_finished_run_trains_nothing_and_leaves_its_checkpoint(runs):
    r = runs["signals"].result()["finished_again"]
    assert r["status"] == [0]
    assert f"the checkpoint is at update {SHORT}, --max-update is {SHORT}: nothing to train" in r["logs"][0]
    assert "train_inner" not in r["logs"][0] and r["files"]["checkpoint_last.pt"] == SHORT


def test_sigterm_to_one_rank_stops_both_ranks_at_the_same_update_and_they_resume_exactly(runs):
    r = runs["signals"].result()
    dist = runs["root"] / "signals" / "dist"
    assert r["dist_reference"]["status"] == [0, 0]
    assert r["dist"]["status"] == [143, 143]  # rank 1 had the signal, rank 0 (which saves) did not
    assert stderr_line(r["dist"], "pmlm: SIGTERM") == (
        f"pmlm: SIGTERM received: saved {dist}/checkpoint_last.pt at update 5; rerun the same command to resume")
    assert r["dist"]["files"]["checkpoint_last.pt"] == 5
    assert r["dist_resumed"]["status"] == [0, 0]
    assert LOADED.search(r["dist_resumed"]["logs"][0]).group(2) == "5"
    reference = runs["root"] / "signals" / "dist_reference" / "checkpoint_last.pt"
    assert max_diff(reference, dist / "checkpoint_last.pt") == 0


def test_following_the_unreadable_checkpoint_advice_resumes(runs):
    r = runs["signals"].result()
    d = runs["root"] / "signals" / "truncated"
    assert r["truncated"]["status"] == [2]
    assert stderr_line(r["truncated"], "error:").endswith(
        f"the newest intact checkpoint there is {d}/checkpoint_2_6.pt (update 6): "
        f"`cp {d}/checkpoint_2_6.pt {d}/checkpoint_last.pt` and rerun the same command to resume from it")
    assert r["advice_followed"]["status"] == [0]
    assert LOADED.search(r["advice_followed"]["logs"][0]).group(2) == "6"
    assert max_diff(reference(runs, "checkpoint3.pt"), d / "checkpoint_last.pt") == 0


@pytest.mark.parametrize("case,reason", [
    ("empty", "an empty file"),
    ("garbage", "not a torch file (1,998 bytes starting b'\\x00\\xff\\x00\\xff')"),
])
def test_empty_or_garbage_checkpoint_last_stops_with_one_line(case, reason, runs):
    r = runs["signals"].result()[case]
    path = runs["root"] / "signals" / case / "checkpoint_last.pt"
    assert r["status"] == [2]
    assert stderr_line(r, "error:") == (f"fairseq-train: error: checkpoint {path} is unreadable ({reason}); no intact "
                                        f"checkpoint beside it: delete it to train from the start")
    assert "Traceback" not in r["logs"][0] and "weights_only" not in r["logs"][0]


def test_missing_restore_file_stops_instead_of_training_from_random_weights(runs):
    r = runs["signals"].result()["no_restore_file"]
    missing = runs["root"] / "signals" / "nowhere" / "checkpoint_9.pt"
    assert r["status"] == [2]
    assert stderr_line(r, "error:") == (f"fairseq-train: error: --restore-file {missing}: no such file; "
                                        f"fairseq would train from random weights")
    assert "train_inner" not in r["logs"][0] and r["files"] == {}


def test_unreadable_finetune_from_model_stops_with_one_line(runs):
    r = runs["signals"].result()["bad_finetune"]
    assert r["status"] == [2]
    path = runs["root"] / "signals" / "pretrained.pt"
    assert stderr_line(r, "error:").startswith(f"fairseq-train: error: checkpoint {path} is unreadable (truncated: ")


def test_generate_and_the_hub_name_an_unreadable_checkpoint_in_one_line(runs, tmp_path):
    """fairseq-generate --path and every other fairseq load go through load_checkpoint_to_cpu;
    the hub reads the checkpoint's cfg first."""
    from fairseq import checkpoint_utils

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model
    from fairseq_pmlm.runtime.checkpoint_files import CheckpointError

    runs["kills"].result()
    whole = (runs["root"] / "kills" / "reference" / "checkpoint_best.pt").read_bytes()
    bad = tmp_path / "checkpoint_best.pt"
    bad.write_bytes(whole[:1000])
    shutil.copy(runs["root"] / "kills" / "reference" / "checkpoint_6_21.pt", tmp_path)
    with pytest.raises(CheckpointError) as e:
        checkpoint_utils.load_model_ensemble_and_task([str(bad)])
    assert str(e.value) == (f"checkpoint {bad} is unreadable (truncated: 1,000 bytes without the zip directory that "
                            f"ends a whole file); the newest intact checkpoint beside it is "
                            f"{tmp_path}/checkpoint_6_21.pt (update 21)")
    assert e.value.__cause__ is None and e.value.__suppress_context__  # torch's traceback is not chained
    with pytest.raises(CheckpointError, match=re.escape(f"checkpoint {bad} is unreadable (truncated")):
        UniLMv2Model.from_pretrained(str(tmp_path), checkpoint_file="checkpoint_best.pt")


# ---- data-loader workers ----------------------------------------------------------------------
class SlowItems(torch.utils.data.Dataset):
    """Twelve items, each fetched in 50 ms: the worker is still at work when the signal comes."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        time.sleep(0.05)
        return torch.tensor([i])


@pytest.fixture
def training_signals():
    """The process as it is while fairseq-train runs: preemption's handler installed."""
    from fairseq_pmlm.runtime import preemption

    assert preemption.install()
    try:
        yield preemption
    finally:
        preemption.uninstall()


def test_a_sigterm_from_outside_leaves_a_data_loader_worker_serving_the_training(training_signals):
    """A scheduler signals the whole process group: the workers too. torch's handler in a worker
    ended it, and the next batch raised "DataLoader worker ... is killed by signal: Terminated"
    in the main process before it could save."""
    loader = iter(torch.utils.data.DataLoader(SlowItems(), batch_size=1, num_workers=1))
    first = int(next(loader))
    worker = loader._workers[0]
    subprocess.run(["kill", "-TERM", str(worker.pid)], check=True)  # not the worker's parent
    time.sleep(0.2)
    assert worker.is_alive()
    assert [first] + [int(b) for b in loader] == list(range(12))
    assert training_signals._state["received"] == []  # only the main process records a signal


def test_the_main_process_still_ends_a_data_loader_worker_with_sigterm(training_signals):
    """torch terminates a worker that does not finish when the loader shuts down: that still ends
    it, quietly (status 0), as torch's own handler does."""
    loader = iter(torch.utils.data.DataLoader(SlowItems(), batch_size=1, num_workers=1))
    next(loader)
    worker = loader._workers[0]
    worker.terminate()
    worker.join(timeout=10)
    assert worker.exitcode == 0
    loader._shutdown_workers()


# ---- sequence-to-sequence fine-tuning -------------------------------------------------------
S2S_UPDATES = 12  # the tiny pairs are 5 batches an epoch: the resumed runs restart in epoch 2


def s2s_args(data, save_dir, updates=S2S_UPDATES):
    """What s2s/finetune.sh runs with a paper preset (word drop and the [P] draws, label smoothing,
    warmup and decay, clipping, two loader workers), on the tiny pairs, from random weights."""
    return [data, "--user-dir", os.path.join(REPO, "fairseq_pmlm"), "--task", "pmlm_seq2seq",
            "--criterion", "pmlm_seq2seq", "--label-smoothing", "0.1", "--arch", "unilmv2_tiny",
            "--max-source-positions", "48", "--max-target-positions", "32", "--target-mask-prob", "0.5",
            "--pseudo-draw", "--optimizer", "adam", "--adam-betas", "(0.9, 0.999)", "--weight-decay", "0.01",
            "--clip-norm", "1.0",
            "--lr", "5e-4", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "2",
            "--total-num-update", str(S2S_UPDATES), "--max-update", str(updates), "--batch-size", "8",
            "--required-batch-size-multiple", "1", "--save-dir", save_dir, "--save-interval-updates", "3",
            "--disable-validation", "--num-workers", "2", "--seed", "3", "--cpu", "--log-format", "json"]


def s2s_chain(root, data):
    """The uninterrupted run, then three interrupted ones, each rerun to the end: SIGKILL just
    before the save at update 6 renames checkpoint_last.pt (resumes at the end of epoch 1), a
    stop at --max-update 7, SIGTERM after update 8 (both resume inside epoch 2)."""
    plans = []

    def add(name, updates=S2S_UPDATES, fault=None):
        plans.append({"argv": [str(a) for a in s2s_args(data, root / name, updates)], "fault": fault,
                      "log": str(root / f"{len(plans):02d}.log"), "save_dir": str(root / name)})

    add("reference")
    add("kill", fault={"signal": "KILL", "at": "replace", "n": 6})
    add("kill")
    add("stop", updates=7)
    add("stop")
    add("term", fault={"signal": "TERM", "at": "update", "n": 8})
    add("term")
    results = drive(plans, root / "plans.json", timeout=400)
    for plan, result in zip(plans, results):
        result["log"] = open(plan["log"]).read()
    return results


@pytest.fixture(scope="module")
def s2s_runs(tmp_path_factory):
    from tiny_s2s import tiny_s2s

    _, data, _ = tiny_s2s(tmp_path_factory)
    root = tmp_path_factory.mktemp("s2s_preemption")
    return root, submit(s2s_chain, root, data)


def test_fine_tuning_resumes_exactly_after_sigkill_a_stop_or_sigterm_in_a_later_epoch(s2s_runs):
    """Resumed in epoch 2, a run used to get other batches (fairseq shuffles a new iterator's
    examples with --seed + its epoch) and, with loader workers, word drops of another epoch."""
    root, job = s2s_runs
    reference, killed, after_kill, stopped, after_stop, termed, after_term = job.result()
    assert reference["status"] == [0] and reference["files"]["checkpoint_last.pt"] == S2S_UPDATES
    assert killed["status"] == [-9] and killed["files"]["checkpoint_last.pt"] == 5
    assert stopped["status"] == [0] and stopped["files"]["checkpoint_last.pt"] == 7
    assert termed["status"] == [143] and termed["files"]["checkpoint_last.pt"] == 8
    diffs = {}
    for name, rerun, at in (("kill", after_kill, 5), ("stop", after_stop, 7), ("term", after_term, 8)):
        assert rerun["status"] == [0] and LOADED.search(rerun["log"]).group(2) == str(at), rerun["log"][-2000:]
        diffs[name] = max_diff(root / "reference" / "checkpoint_last.pt", root / name / "checkpoint_last.pt")
    print(f"fine-tuning resumed at updates 5, 7, 8: parameters and optimizer state vs the uninterrupted run: {diffs}")
    assert diffs == {"kill": 0, "stop": 0, "term": 0}
