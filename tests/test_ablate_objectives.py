"""scripts/ablate_objectives.sh at toy size: two objectives, one seed, a few updates of the tiny
pre-trained model of nlu.py, on pairs of its language; the table, the JSON and the plots it
writes, a re-run that only reads what is done, and its one-line refusals of bad input."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from cli import ENV, REPO, recipe, run_main
from nlu import pretrained, sentence
from tiny_s2s import tiny_s2s

ABLATE = os.path.join(REPO, "scripts", "ablate_objectives.sh")


def ablate(*args, out):
    """ablate_objectives.sh ARGS --out OUT, pre-training flags for fairseq after -- (its commands
    from the warm process: cli.recipe)."""
    return recipe("ablate_objectives.sh", *args, "--out", out, "--", "--num-workers", "0", check=False, timeout=600)


def ablate_in_process(*args, out):
    """The driver's main(ARGS) in this process (a refusal before any run: no ~3 s import each)."""
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import ablate_objectives

    return run_main(ablate_objectives.main, *args, "--out", out, "--", "--num-workers", "0")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    pre = pretrained(tmp_path_factory)
    tmp = tmp_path_factory.mktemp("ablation")
    rng = random.Random(3)
    raw = tmp / "raw"
    raw.mkdir()
    for split, n in (("train", 40), ("valid", 6), ("test", 6)):
        sources = [sentence(rng, rng.randint(4, 8)) for _ in range(n)]
        (raw / f"{split}.source").write_text("".join(s + "\n" for s in sources))
        (raw / f"{split}.target").write_text("".join(" ".join(s.split()[:2]) + "\n" for s in sources))
    recipe("s2s/prepare.sh", "--raw", raw, "--name", "pairs", "--pretrain-data", pre["data"], "--destdir", tmp,
           "--workers", "1")
    args = ["--pretrain-data", pre["data"], "--pairs", tmp / "pairs", "--refs", raw / "test.target",
            "--init", pre["checkpoint"], "--objectives", "ae,ae+par", "--seeds", "1", "--updates", "3",
            "--ft-updates", "2", "--lanes", "2"]
    first = ablate(*args, out=tmp / "out")
    again = ablate(*args, out=tmp / "out")
    return tmp, pre, args, first, again


def test_the_ablation_runs_every_objective_and_writes_the_table_the_json_and_the_plots(toy):
    tmp, _, _, first, _ = toy
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    out = tmp / "out"
    results = json.loads((out / "results.json").read_text())
    rows = {r["objective"]: r for r in results["objectives"]}
    assert list(rows) == ["ae", "ae+par"] and results["test_examples"] == 6
    for r in rows.values():
        assert r["seeds"] == [1] and len(r["rouge1"]) == len(r["rouge2"]) == len(r["rougeL"]) == 1
        assert r["rougeL_mean"] == pytest.approx(r["rougeL"][0]) and r["pretrain_tokens"][0] > 0
    assert rows["ae"]["vs_ae"] is None and rows["ae"]["cost_per_update_vs_ae"] == 1.0
    lo, hi = rows["ae+par"]["vs_ae"]["ci95"]
    assert lo <= rows["ae+par"]["vs_ae"]["rougeL_diff"] <= hi
    # PAR appends a [P] and a copy of every masked token: more tokens an update than AE alone
    assert rows["ae+par"]["tokens_per_update"] > rows["ae"]["tokens_per_update"]
    table = (out / "table.md").read_text()
    assert "| objective | ROUGE-1 | ROUGE-2 | ROUGE-L | ROUGE-L vs ae |" in table and "| ae+par |" in table
    assert table in first.stdout
    assert (out / "rougeL.png").stat().st_size > 1000 and (out / "pretrain_curves.png").stat().st_size > 1000
    for line in ("ae/seed 1: pre-training: 3 updates", "ae+par/seed 1: fine-tuning: 2 updates",
                 "ae+par/seed 1: decoding: ROUGE-L", "(2/2 runs)"):
        assert line in first.stdout
    # only checkpoint_last.pt stays of a pre-training run
    assert sorted(p for p in os.listdir(out / "runs" / "ae-seed1" / "pretrain") if p.endswith(".pt")) == [
        "checkpoint_last.pt"]


def test_the_same_command_again_trains_nothing_and_prints_the_same_table(toy):
    tmp, _, _, first, again = toy
    assert again.returncode == 0, again.stderr
    assert "pre-training:" not in again.stdout and "fine-tuning:" not in again.stdout
    # the two lanes may finish in either order: each run is reported done before, the last as 2/2
    assert "ae/seed 1: done before" in again.stdout and "ae+par/seed 1: done before" in again.stdout
    assert "done before (2/2 runs)" in again.stdout
    assert (tmp / "out" / "table.md").read_text() in again.stdout


def test_other_settings_with_the_same_out_are_refused(toy):
    tmp, _, args, *_ = toy
    proc = ablate(*[("7" if a == "3" else a) for a in args], out=tmp / "out")
    assert proc.returncode == 2 and proc.stderr.startswith("ablate_objectives.sh: error: --out ")
    assert "other settings (updates)" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_bad_input_is_refused_in_one_line_before_anything_runs(toy, tmp_path_factory, tmp_path):
    tmp, pre, args, *_ = toy
    _, other_data, other_save = tiny_s2s(tmp_path_factory)  # another dictionary
    other_checkpoint = other_save / "checkpoint_last.pt"

    def refused(changes, message):
        new = list(args)
        for flag, value in changes.items():
            if flag in new:
                new[new.index(flag) + 1] = value
            else:
                new += [flag, value]
        proc = ablate_in_process(*new, out=tmp_path / "x")
        assert proc.returncode == 2, proc.stdout[-2000:]
        assert len(proc.stderr.splitlines()) == 1 and message in proc.stderr, proc.stderr
        assert not (tmp_path / "x").exists()

    refused({"--objectives": "ae,mlm"}, "--objectives: unknown objective 'mlm' (known: none, ae, ar, par")
    refused({"--pretrain-data": tmp / "missing"}, f"--pretrain-data {tmp / 'missing'}: no dict.txt")
    refused({"--pairs": other_data}, "are different dictionaries: prepare the pairs with scripts/s2s/prepare.sh")
    refused({"--init": other_checkpoint}, "a checkpoint of another dictionary")
    refused({"--init": "random"}, "--init random needs --arch")
    refused({"--refs": pre["dict"]}, "test pairs")
    # every flag before --out is claimed: a refused --preset, then the corrected command, ran
    refused({"--preset": "cnn"}, "--preset cnn: unknown preset")
    refused({"--lr": "fast"}, "--lr must be a positive number, not 'fast'")
    refused({"--ft-flags": "'0"}, "--ft-flags \"'0\": No closing quotation")
    refused({"--updates": "0"}, "argument --updates: must be a positive integer: 0")
    # the fairseq-train flags of both stages, by fairseq's own parser
    refused({"--ft-flags": "--dropuot 0"},
            "--ft-flags '--dropuot 0': fairseq-train refuses them: unrecognized arguments: --dropuot 0")
    proc = subprocess.run(["bash", ABLATE, *map(str, args), "--out", str(tmp_path / "x"), "--", "--lr-shceduler",
                           "fixed"], capture_output=True, text=True, env={**os.environ, **ENV}, cwd=REPO, timeout=600)
    assert proc.returncode == 2 and not (tmp_path / "x").exists()
    assert proc.stderr == ("ablate_objectives.sh: error: the flags after -- '--lr-shceduler fixed': fairseq-train "
                           "refuses them: unrecognized arguments: --lr-shceduler fixed\n")


def test_references_without_a_final_newline_are_counted_as_generate_sh_and_score_py_count_them(toy, tmp_path):
    tmp, _, args, *_ = toy
    refs = tmp_path / "refs.txt"
    refs.write_bytes((tmp / "raw" / "test.target").read_bytes().rstrip(b"\n"))  # 6 lines, the last unended
    new = list(args)
    new[new.index("--refs") + 1] = refs
    new[new.index("--init") + 1] = "random"  # refused at the next check, after --refs passed
    proc = ablate_in_process(*new, out=tmp_path / "x")
    assert proc.returncode == 2 and "--init random needs --arch" in proc.stderr, proc.stderr


def test_ctrl_c_lets_the_running_pre_training_save_exits_130_and_the_same_command_resumes(toy, tmp_path):
    """Ctrl-C reached fairseq-train as SIGINT (a KeyboardInterrupt, nothing saved) and the driver
    exited 2; now it passes SIGTERM on, as the other recipes do, and exits 130 (SIGTERM: 143)."""
    tmp, _, args, *_ = toy
    new = list(args)
    new[new.index("--updates") + 1] = "100000"
    new[new.index("--objectives") + 1] = "ae"
    cmd = ["bash", ABLATE, *map(str, new), "--out", str(tmp_path / "out"), "--", "--num-workers", "0",
           "--log-interval", "1", "--save-interval-updates", "100000"]
    save = tmp_path / "out" / "runs" / "ae-seed1" / "pretrain"

    def stopped_at(sig):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, **ENV}, cwd=REPO, start_new_session=True)
        seen, deadline = "", time.time() + 120
        while "pre-training: train: num_updates" not in seen and time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
        assert proc.poll() is None, seen[-2000:]
        os.killpg(proc.pid, sig)  # as Ctrl-C in a terminal (the whole group), or a scheduler's SIGTERM
        try:
            seen += proc.communicate(timeout=60)[0]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        log = (save / "train.log").read_text()
        assert "pmlm: SIGTERM received: saved" in log.split("### ")[-1] and "KeyboardInterrupt" not in log, log[-2000:]
        return proc.returncode, seen

    rc, _ = stopped_at(signal.SIGINT)
    assert rc == 130 and (save / "checkpoint_last.pt").is_file()
    rc, seen = stopped_at(signal.SIGTERM)  # the same command again: it resumes the saved run
    assert rc == 143 and "(epoch 1 @ " in (save / "train.log").read_text().split("### ")[-1], seen[-2000:]
