"""The CI smoke test of the recipes: every one of them, end to end, on tiny data, in the order a
user runs them, each handing the next what it made:

    prepare_data.sh -> pre-training (fairseq-train, the README's command) -> plot_curves.py
    -> s2s/prepare.sh -> s2s/finetune.sh -> s2s/generate.sh (score.py)
    -> glue/prepare_glue.py -> glue/finetune_glue.sh
    -> squad/finetune_squad.sh (predict_squad.py) -> squad/evaluate_squad.py
    -> convert_checkpoint.py export -> convert_checkpoint.py import

A tiny model and a few updates each: this proves that the recipes run and fit together, not what
the models learn (test_seq2seq.py, test_glue.py, test_squad.py and test_released_minilm.py do).
train_distributed.sh runs in test_distributed.py and bench_gpu.sh in test_bench_gpu.py. Also:
every shell script answers --help and refuses a flag where a value belongs, in one line.
"""
import json
import os
import random
import subprocess
import sys

import pytest
import torch

from cli import REPO, USER_DIR, submit, write_corpus
from nlu import marker_rte, marker_squad, sentence

sys.path.insert(0, os.path.join(REPO, "scripts"))
import recipe_info  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # the commands must be quiet themselves
ENV.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
SHELL_SCRIPTS = {  # each with a flag that takes a value
    "prepare_data.sh": "--train", "s2s/prepare.sh": "--raw", "s2s/finetune.sh": "--checkpoint",
    "s2s/generate.sh": "--refs", "glue/finetune_glue.sh": "--data", "squad/finetune_squad.sh": "--train-json",
    "train_distributed.sh": "--nproc", "bench_gpu.sh": "--wheels", "setup_env.sh": None,
}
FEW = ["--cpu", "--num-workers", "0"]


def recipe(done, name, *args):
    """Run scripts/NAME (bash for .sh, else python; a bare name is a console script) and keep
    its CompletedProcess in ``done``; a failure stops the chain with the recipe's output."""
    path = os.path.join(REPO, "scripts", name)
    cmd = ["bash", path] if name.endswith(".sh") else [sys.executable, path] if name.endswith(".py") else [
        os.path.join(os.path.dirname(sys.executable), name)]
    proc = subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    done[name if name not in done else f"{name} {args[0]}"] = proc
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def tiny_data(tmp):
    """Text of a 10-word language; s2s pairs (a sentence -> its first two words); RTE and SQuAD
    files of the same language."""
    rng = random.Random(0)
    write_corpus(tmp / "train.txt", [[sentence(rng, rng.randint(3, 8), 1) + " ." for _ in range(3)] for _ in range(60)])
    write_corpus(tmp / "valid.txt", [[sentence(rng, rng.randint(3, 8), 1) + " ." for _ in range(3)] for _ in range(6)])
    raw = tmp / "raw"
    raw.mkdir()
    for split, n in (("train", 40), ("valid", 8), ("test", 8)):
        sources = [sentence(rng, rng.randint(4, 8)) for _ in range(n)]
        (raw / f"{split}.source").write_text("".join(s + "\n" for s in sources))
        (raw / f"{split}.target").write_text("".join(" ".join(s.split()[:2]) + "\n" for s in sources))
    marker_rte(tmp / "RTE", rng, sizes=(("train", 32), ("dev", 8)))
    return raw, tmp / "RTE", marker_squad(tmp / "train.json", rng, 24), marker_squad(tmp / "dev.json", rng, 8)


def seq2seq_branch(tmp, pre, pmlm, raw):
    done = {}
    recipe(done, "s2s/prepare.sh", "--raw", raw, "--name", "pairs", "--pretrain-data", pre, "--destdir", tmp,
           "--workers", "1")
    recipe(done, "s2s/finetune.sh", "--preset", "demo", "--data", tmp / "pairs", "--checkpoint", pmlm,
           "--save-dir", tmp / "s2s", "--", "--max-update", "2", "--batch-size", "8", "--disable-validation",
           "--log-interval", "1", *FEW)
    recipe(done, "s2s/generate.sh", "--preset", "demo", "--data", tmp / "pairs",
           "--checkpoint", tmp / "s2s" / "checkpoint_last.pt", "--refs", raw / "test.target", "--out-dir", tmp / "gen",
           "--", "--max-len-b", "4", "--beam", "2", "--batch-size", "8", *FEW)
    return done


def nlu_and_weights_branch(tmp, pre, pmlm, rte, squad_train, squad_dev):
    done = {}
    recipe(done, "glue/prepare_glue.py", "--task", "RTE", "--glue-dir", rte, "--pretrain-data", pre,
           "--destdir", tmp / "glue-RTE")
    recipe(done, "glue/finetune_glue.sh", "--data", tmp / "glue-RTE", "--checkpoint", pmlm, "--save-dir", tmp / "glue",
           "--batch-size", "8", "--epochs", "1", "--", "--max-positions", "64", *FEW)
    recipe(done, "squad/finetune_squad.sh", "--data", pre, "--train-json", squad_train, "--dev-json", squad_dev,
           "--checkpoint", pmlm, "--save-dir", tmp / "squad", "--v2", "--batch-size", "8", "--epochs", "1",
           "--max-positions", "32", "--doc-stride", "8", "--", "--max-query-len", "8", *FEW)
    squad = tmp / "squad"
    recipe(done, "squad/evaluate_squad.py", squad_dev, squad / "predictions.json",
           "--na-prob-file", squad / "null_odds.json")
    recipe(done, "convert_checkpoint.py", "export", pmlm, tmp / "hf")
    recipe(done, "convert_checkpoint.py", "import", tmp / "hf", tmp / "reimported")
    return done


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recipes")
    raw, rte, squad_train, squad_dev = tiny_data(tmp)
    done = {}
    recipe(done, "prepare_data.sh", "--train", tmp / "train.txt", "--valid", tmp / "valid.txt", "--name", "text",
           "--vocab-size", "40", "--destdir", tmp, "--workers", "1")
    pre = tmp / "text"
    recipe(done, "fairseq-train", pre, "--user-dir", USER_DIR, "--task", "pseudo_masked_lm", "--arch", "unilmv2_tiny",
           "--criterion", "pmlm", "--tokens-per-sample", "64", "--batch-size", "8", "--optimizer", "adam",
           "--lr", "1e-3", "--max-update", "4", "--log-format", "json", "--log-interval", "1",
           "--save-dir", tmp / "pmlm", "--no-epoch-checkpoints", *FEW)
    (tmp / "pmlm.log").write_text(done["fairseq-train"].stdout)
    recipe(done, "plot_curves.py", tmp / "pmlm.log", "--out", tmp / "curves.png")
    pmlm = tmp / "pmlm" / "checkpoint_last.pt"
    branches = [submit(seq2seq_branch, tmp, pre, pmlm, raw),
                submit(nlu_and_weights_branch, tmp, pre, pmlm, rte, squad_train, squad_dev)]
    for branch in branches:
        done.update(branch.result())
    return tmp, done


def test_prepare_data_and_pre_training_write_what_the_plot_reads(chain):
    tmp, done = chain
    assert {"dict.txt", "spm.model", "train.bin", "valid.idx"} <= set(os.listdir(tmp / "text"))
    assert "prepare_data: wrote" in done["prepare_data.sh"].stdout
    assert (tmp / "pmlm" / "checkpoint_last.pt").is_file()
    assert "ae_loss" in done["plot_curves.py"].stdout and (tmp / "curves.png").stat().st_size > 1000


def test_seq2seq_recipes_prepare_finetune_decode_and_score(chain):
    tmp, done = chain
    assert {"dict.source.txt", "spm.model", "test.source-target.target.idx"} <= set(os.listdir(tmp / "pairs"))
    state = torch.load(tmp / "s2s" / "checkpoint_last.pt", weights_only=True, mmap=True)
    assert state["cfg"]["model"]["_name"] == "unilmv2_tiny" and state["cfg"]["bpe"]["_name"] == "sentencepiece"
    assert {"dict.source.txt", "spm.model"} <= set(os.listdir(tmp / "s2s"))  # what the hub needs beside it
    assert len((tmp / "gen" / "hyp.txt").read_text().splitlines()) == 8
    assert "| system | ROUGE-1" in (tmp / "gen" / "scores.txt").read_text()


def test_glue_recipe_prepares_finetunes_and_reports_the_dev_metric(chain):
    _, done = chain
    assert "prepare_glue: wrote" in done["glue/prepare_glue.py"].stdout
    assert "finetune_glue: RTE valid (best epoch 1): accuracy " in done["glue/finetune_glue.sh"].stdout


def test_squad_recipe_finetunes_predicts_and_the_official_script_scores_it(chain):
    tmp, done = chain
    answers = json.loads((tmp / "squad" / "predictions.json").read_text())
    assert len(answers) == 8 and "predict_squad: {" in done["squad/finetune_squad.sh"].stdout
    assert json.loads(done["squad/evaluate_squad.py"].stdout)["total"] == 8


def test_a_pretrained_checkpoint_exports_to_hugging_face_and_imports_back_as_the_same_model(chain):
    tmp, done = chain
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(os.listdir(tmp / "hf"))
    before = torch.load(tmp / "pmlm" / "checkpoint_last.pt", weights_only=True)["model"]
    after = torch.load(tmp / "reimported" / "model.pt", weights_only=True)["model"]
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_the_recipes_print_their_own_lines_and_fairseq_log_without_deprecation_warnings(chain):
    _, done = chain
    for name, proc in done.items():
        assert "Warning" not in proc.stderr and "tensorboardX" not in proc.stdout + proc.stderr, (name, proc.stderr)


@pytest.mark.parametrize("script", SHELL_SCRIPTS)
def test_every_shell_script_answers_help_and_refuses_a_flag_where_a_value_belongs(script):
    path = os.path.join(REPO, "scripts", script)
    helped = subprocess.run(["bash", path, "--help"], capture_output=True, text=True, env=ENV)
    header = [line[2:].rstrip() for line in open(path).readlines()[1:3]]
    assert helped.returncode == 0 and not helped.stderr and helped.stdout.splitlines()[:2] == header
    flag = SHELL_SCRIPTS[script]
    bad = subprocess.run(["bash", path, *([flag, "--help"] if flag else ["--bogus"])],
                         capture_output=True, text=True, env=ENV)
    message = f"{flag} needs a value" if flag else "unknown argument: --bogus (it takes none; see --help)"
    assert bad.returncode == 2 and bad.stderr == f"{script}: error: {message}\n"


def test_schedule_is_whole_epochs_of_batches_with_the_warmup_share_rounded():
    assert recipe_info.schedule(400, 16, 6, 0.1) == (150, 15)
    assert recipe_info.schedule(33, 16, 2, 0.02) == (6, 1)  # a warmup ratio above 0 gives at least one update
    assert recipe_info.schedule(33, 16, 2, 0.0) == (6, 0)
    with pytest.raises(ValueError, match="schedule: need examples, batch and epochs >= 1"):
        recipe_info.schedule(0, 16, 1, 0.1)


def test_glue_report_gives_the_best_epoch_of_the_metric_per_dev_set(tmp_path):
    def record(subset, epoch, **values):
        rec = {"epoch": epoch, **{f"{subset}_{k}": str(v) for k, v in values.items()}}
        return f"2026-01-01 00:00:00 | INFO | {subset} | {json.dumps(rec)}\n"

    log = tmp_path / "train.log"
    log.write_text(record("valid", 1, mcc=10, accuracy=70) + record("valid1", 1, mcc=30, accuracy=60) + "noise\n"
                   + record("valid", 2, mcc=20, accuracy=65) + record("valid1", 2, mcc=25, accuracy=90))
    assert recipe_info.glue_report(str(log), "CoLA", "mcc") == [
        "finetune_glue: CoLA valid (best epoch 2): mcc 20.00, accuracy 65.00",
        "finetune_glue: CoLA valid1 (best epoch 1): mcc 30.00, accuracy 60.00"]
    with pytest.raises(ValueError, match="no dev f1 in"):
        recipe_info.glue_report(str(log), "MRPC", "f1")


def test_the_device_is_found_once_and_without_torch_where_nvidia_smi_shows_no_gpu(tmp_path):
    """common.sh's device_flags: no nvidia-smi, no GPU (torch is not imported); with one, one
    probe, which nested recipes inherit through PMLM_GPUS."""
    probe = ('source scripts/lib/common.sh; python() { echo probed >&2; echo 1; }; '
             'device_flags; echo "${DEVICE[*]} $PMLM_GPUS"; device_flags; bash -c \'echo "inherited $PMLM_GPUS"\'')
    env = {k: v for k, v in ENV.items() if k != "PMLM_GPUS"}
    (tmp_path / "bin").mkdir()
    no_gpu = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, cwd=REPO,
                            env={**env, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert no_gpu.stdout == "--cpu 0\ninherited 0\n" and "probed" not in no_gpu.stderr
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: A fake GPU (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    gpu = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, cwd=REPO,
                         env={**env, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert gpu.stdout == "--fp16 1\ninherited 1\n" and gpu.stderr.count("probed") == 1
