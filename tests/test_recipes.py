"""The CI smoke test of the recipes: every one of them, end to end, on tiny data, in the order a
user runs them, each handing the next what it made:

    prepare_data.sh -> pre-training (fairseq-train, docs/PRETRAINING.md's command) -> plot_curves.py
    -> s2s/prepare.sh -> s2s/finetune.sh -> s2s/generate.sh (score.py)
    -> glue/prepare_glue.py -> glue/finetune_glue.sh
    -> squad/finetune_squad.sh (predict_squad.py) -> squad/evaluate_squad.py
    -> convert_checkpoint.py export -> convert_checkpoint.py import (of the export)

The first two, GLUE and SQuAD are the runs test_glue.py and test_squad.py check for learning
(tests/nlu.py builds them once a session); this file adds the rest on a few updates of the same
tiny model and checks that each recipe ran and handed on what the next one reads.
train_distributed.sh runs in test_distributed.py, bench_gpu.sh in test_bench_gpu.py, and the
s2s recipes on real released weights (WordPiece) in test_released_minilm.py. Also: every shell
script answers --help and refuses a flag where a value belongs, in one line.
"""
import json
import os
import random
import subprocess
import sys

import pytest
import torch

from fairseq_pmlm import recipe_info

from cli import REPO, records, submit
from cli import recipe as warm_recipe
from nlu import glue_recipe, pretrained, sentence, squad_recipe, tokenizer

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # the commands must be quiet themselves
ENV.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
SHELL_SCRIPTS = {  # each with a flag that takes a value
    "prepare_data.sh": "--train", "s2s/prepare.sh": "--raw", "s2s/finetune.sh": "--checkpoint",
    "s2s/generate.sh": "--refs", "glue/finetune_glue.sh": "--data", "squad/finetune_squad.sh": "--train-json",
    "train_distributed.sh": "--nproc", "bench_gpu.sh": "--wheels", "setup_env.sh": None,
    "ablate_objectives.sh": "--pairs", "docstring_task.sh": "--out", "pretrain.sh": "--data",
}
FEW = ["--cpu", "--num-workers", "0"]


def recipe(done, name, *args, key=None):
    """Run scripts/NAME (bash for .sh, else python) and keep its CompletedProcess in ``done``
    (under ``key``, default NAME); a failure stops the chain with the recipe's output."""
    path = os.path.join(REPO, "scripts", name)
    cmd = ["bash", path] if name.endswith(".sh") else [sys.executable, path]
    proc = subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=300)
    done[key or name] = proc
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def seq2seq_pairs(raw):
    """A sentence of the tiny language -> its first two words."""
    rng = random.Random(0)
    raw.mkdir()
    for split, n in (("train", 40), ("valid", 8), ("test", 8)):
        sources = [sentence(rng, rng.randint(4, 8)) for _ in range(n)]
        (raw / f"{split}.source").write_text("".join(s + "\n" for s in sources))
        (raw / f"{split}.target").write_text("".join(" ".join(s.split()[:2]) + "\n" for s in sources))
    return raw


def seq2seq_recipes(tmp, pre):
    done, raw = {}, seq2seq_pairs(tmp / "raw")
    recipe(done, "s2s/prepare.sh", "--raw", raw, "--name", "pairs", "--pretrain-data", pre["data"], "--destdir", tmp,
           "--workers", "1")
    recipe(done, "s2s/finetune.sh", "--preset", "demo", "--data", tmp / "pairs", "--checkpoint", pre["checkpoint"],
           "--save-dir", tmp / "s2s", "--", "--max-update", "2", "--batch-size", "8", "--disable-validation",
           "--log-interval", "1", *FEW)
    recipe(done, "s2s/generate.sh", "--preset", "demo", "--data", tmp / "pairs",
           "--checkpoint", tmp / "s2s" / "checkpoint_last.pt", "--refs", raw / "test.target", "--out-dir", tmp / "gen",
           "--", "--max-len-b", "4", "--beam", "2", "--batch-size", "8", *FEW)
    return done


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recipes")
    pre = pretrained(tmp_path_factory)  # prepare_data.sh, then docs/PRETRAINING.md's fairseq-train
    s2s = submit(seq2seq_recipes, tmp, pre)
    glue, squad = glue_recipe(tmp_path_factory), squad_recipe(tmp_path_factory)
    done = {}  # the recipes run here, with the user's environment (shown warnings and all)
    recipe(done, "plot_curves.py", pre["log"], "--out", tmp / "curves.png")
    recipe(done, "convert_checkpoint.py", "export", pre["checkpoint"], tmp / "hf")
    recipe(done, "convert_checkpoint.py", "import", tmp / "hf", tmp / "imported", key="convert_checkpoint.py import")
    done.update(s2s.result())
    squad = squad.result()
    shared = {"prepare_data.sh": pre["prepare"], "glue/finetune_glue.sh": glue["RTE"].result()["lines"],
              "squad/finetune_squad.sh": squad["proc"]}
    save = squad["save"]
    recipe(done, "squad/evaluate_squad.py", squad["dev"], save / "predictions.json", "--na-prob-file",
           save / "null_odds.json")
    return tmp, pre, {**shared, **done}, squad, done


def test_prepare_data_and_pre_training_write_what_the_plot_reads(chain):
    tmp, pre, done, *_ = chain
    assert {"dict.txt", "spm.model", "train.bin", "valid.idx"} <= set(os.listdir(pre["data"]))
    assert "prepare_data: wrote" in done["prepare_data.sh"].stdout
    assert pre["checkpoint"].is_file()
    assert "ae_loss" in done["plot_curves.py"].stdout and (tmp / "curves.png").stat().st_size > 1000


def test_seq2seq_recipes_prepare_finetune_decode_and_score(chain):
    tmp, _, done, *_ = chain
    assert {"dict.source.txt", "spm.model", "test.source-target.target.idx"} <= set(os.listdir(tmp / "pairs"))
    state = torch.load(tmp / "s2s" / "checkpoint_last.pt", weights_only=True, mmap=True)
    assert state["cfg"]["model"]["_name"] == "unilmv2_tiny" and state["cfg"]["bpe"]["_name"] == "sentencepiece"
    assert {"dict.source.txt", "spm.model"} <= set(os.listdir(tmp / "s2s"))  # what the hub needs beside it
    assert len((tmp / "gen" / "hyp.txt").read_text().splitlines()) == 8
    assert "| system | ROUGE-1" in (tmp / "gen" / "scores.txt").read_text()
    assert "s2s/finetune: demo on" in done["s2s/finetune.sh"].stdout
    assert " 2 updates of 8," in done["s2s/finetune.sh"].stdout  # the flags after --, not the preset's


def test_glue_recipe_prepares_finetunes_and_reports_the_dev_metric(chain):
    _, _, done, *_ = chain
    assert done["glue/finetune_glue.sh"][-1].startswith("finetune_glue: RTE valid (best epoch ")


def test_squad_recipe_finetunes_predicts_and_the_official_script_scores_it(chain):
    _, _, done, squad, _ = chain
    answers = json.loads((squad["save"] / "predictions.json").read_text())
    assert len(answers) == 100 and "predict_squad: {" in done["squad/finetune_squad.sh"].stdout
    assert json.loads(done["squad/evaluate_squad.py"].stdout)["total"] == 100


def test_a_pretrained_checkpoint_exports_to_a_hugging_face_bert_directory(chain):
    tmp, _, done, *_ = chain
    config = json.loads((tmp / "hf" / "config.json").read_text())
    assert config["model_type"] == "unilmv2" and config["num_hidden_layers"] == 2
    assert {"model.safetensors", "vocab.txt"} <= set(os.listdir(tmp / "hf"))
    assert "convert_checkpoint: wrote" in done["convert_checkpoint.py"].stdout
    # and back: the exported directory imports as released weights would
    assert {"model.pt", "dict.txt", "vocab.txt"} <= set(os.listdir(tmp / "imported"))
    assert "train with: --arch unilmv2_tiny" in done["convert_checkpoint.py import"].stdout


def test_the_recipes_print_their_own_lines_and_fairseq_log_without_deprecation_warnings(chain):
    *_, run_here = chain
    assert len(run_here) == 7
    for name, proc in run_here.items():
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


def test_a_recipe_without_a_set_up_says_how_to_make_one_and_writes_nothing(tmp_path):
    """No .venv and a python without torch: one line naming the set-up, before OUT exists; a python
    with torch and fairseq (a user's own environment) runs the recipe; --help needs neither."""
    import shutil

    shutil.copytree(os.path.join(REPO, "scripts"), tmp_path / "repo" / "scripts")
    recipe = str(tmp_path / "repo" / "scripts" / "docstring_task.sh")
    for name, flags in (("bare", "-S"), ("own", "")):  # -S: no site-packages, so no torch
        (tmp_path / name).mkdir()
        (tmp_path / name / "python").write_text(f'#!/bin/sh\nexec {sys.executable} {flags} "$@"\n')
        (tmp_path / name / "python").chmod(0o755)
    env = {**ENV, "PATH": f"{tmp_path / 'bare'}:/usr/bin:/bin"}
    out = tmp_path / "out"
    bare = subprocess.run(["bash", recipe, "--out", str(out)], capture_output=True, text=True, env=env)
    assert bare.returncode == 2 and bare.stderr == (
        f"docstring_task.sh: error: no set-up: {tmp_path / 'bare' / 'python'} lacks torch or fairseq "
        f"({tmp_path / 'repo' / '.venv'}: none): run 'bash scripts/setup_env.sh' once (PMLM_WHEELS=DIR: "
        "from a folder of wheels)\n") and not out.exists()
    helped = subprocess.run(["bash", recipe, "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and helped.stdout.startswith("The docstring summarisation task")
    (out / "corpus").mkdir(parents=True)  # refused after the set-up's check: this one is past it
    own = subprocess.run(["bash", recipe, "--out", str(out)], capture_output=True, text=True,
                         env={**env, "PATH": f"{tmp_path / 'own'}:/usr/bin:/bin"})
    assert own.returncode == 2 and own.stderr == (f"docstring_task.sh: error: --out {out} already holds corpus/: "
                                                  "pick another directory\n")


def test_schedule_is_whole_epochs_of_batches_with_the_warmup_share_rounded():
    assert recipe_info.schedule(400, 16, 6, 0.1) == (150, 15)
    assert recipe_info.schedule(33, 16, 2, 0.02) == (6, 1)  # a warmup ratio above 0 gives at least one update
    assert recipe_info.schedule(33, 16, 2, 0.0) == (6, 0)
    with pytest.raises(ValueError, match="schedule: need examples, batch and epochs >= 1"):
        recipe_info.schedule(0, 16, 1, 0.1)
    assert recipe_info.schedule(13030, 16, 1, 0.1, updates=720) == (720, 72)  # finetune.sh --updates
    with pytest.raises(ValueError, match="schedule: need updates >= 1, got 0"):
        recipe_info.schedule(400, 16, 6, 0.1, updates=0)


def test_one_run_answers_several_queries_as_bash_arrays_whatever_the_paths_hold(tmp_path, capsys):
    """recipe_facts (scripts/lib/common.sh) evals what --shell prints: each query's lines become
    one array, quoted so that spaces, quotes and $ in a path stay as they are."""
    from fairseq_pmlm.text.vocab import write_vocab

    data = tmp_path / "it's a $HOME dir"
    data.mkdir()
    write_vocab(str(data / "vocab.txt"), ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
    (data / "dict.txt").write_text("a 1\n")
    idx = data / "train.idx"
    idx.write_bytes(b"MMIDIDX\x00\x00" + (1).to_bytes(8, "little") + bytes([4]) + (40).to_bytes(8, "little"))
    assert recipe_info.main(["--shell", "BPE", "bpe-flags", str(data), "+", "N", "count-items", str(idx), "+",
                             "S", "schedule", "--items", str(idx), "--batch", "16", "--epochs", "2",
                             "--warmup-ratio", "0.1", "+", "SEP", "separator", str(data)]) == 0
    show = 'eval "$1"; printf "%s|" "${BPE[@]}" "${#N[@]}" "$N" "$S" "${#SEP[@]}" "$SEP"'
    shown = subprocess.run(["bash", "-c", show, "-", capsys.readouterr().out], capture_output=True, text=True,
                           check=True).stdout
    assert shown == f"--bpe|bert|--bpe-vocab-file|{data / 'vocab.txt'}|1|40|6 1|1||"
    assert recipe_info.main(["--shell", "N", "count-items", str(tmp_path / "none.idx")]) == 2
    assert recipe_info.main(["--shell", "1N", "gpus"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == \
        "recipe_info.py: error: --shell: expected NAME SUBCOMMAND ARGS between +, got '1N gpus'"


def test_glue_report_gives_every_dev_set_at_the_epoch_of_checkpoint_best(tmp_path):
    """checkpoint_best.pt is the epoch where the first dev set's metric is best (the later one of a
    tie); MNLI-mismatched (valid1) was reported at its own best epoch, which no saved model has."""
    def record(subset, epoch, **values):
        rec = {"epoch": epoch, **{f"{subset}_{k}": str(v) for k, v in values.items()}}
        return f"2026-01-01 00:00:00 | INFO | {subset} | {json.dumps(rec)}\n"

    log = tmp_path / "train.log"
    log.write_text(record("valid", 1, mcc=10, accuracy=70) + record("valid1", 1, mcc=30, accuracy=60) + "noise\n"
                   + record("valid", 2, mcc=20, accuracy=65) + record("valid1", 2, mcc=25, accuracy=90))
    assert recipe_info.glue_report(str(log), "CoLA", "mcc") == [
        "finetune_glue: CoLA valid (best epoch 2): mcc 20.00, accuracy 65.00",
        "finetune_glue: CoLA valid1 (epoch 2, the best on valid): mcc 25.00, accuracy 90.00"]
    with open(log, "a") as f:  # a tie on valid: fairseq saves the later epoch as the best
        f.write(record("valid", 3, mcc=20, accuracy=50) + record("valid1", 3, mcc=5, accuracy=40))
    assert recipe_info.glue_report(str(log), "CoLA", "mcc")[0] == \
        "finetune_glue: CoLA valid (best epoch 3): mcc 20.00, accuracy 50.00"
    with pytest.raises(ValueError, match="no dev f1 in"):
        recipe_info.glue_report(str(log), "MRPC", "f1")


def test_a_flag_after_the_double_dash_is_read_as_fairseq_reads_it_the_last_one_wins():
    """common.sh's extra_value: what a recipe reports is what fairseq-train will use."""
    probe = ('source scripts/lib/common.sh; EXTRA=(--lr 1e-3 --max-update=40 --lr 3e-4); '
             'extra_value --lr 5e-4; extra_value --max-update 815; extra_value --warmup-updates 81')
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, cwd=REPO, env=ENV)
    assert out.stdout.split() == ["3e-4", "40", "81"]


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


def test_pretrain_sh_schedule_and_its_line_follow_flags_given_after_the_double_dash(tmp_path_factory, tmp_path):
    """Flags after -- override the recipe's (fairseq takes the last). With --max-update there the warmup
    and decay stayed on --updates' length: the lr was 0 from update 2, and the 4 updates after it trained
    nothing; the line said 16 sequences an update where fairseq took the --batch-size after --."""
    proc = warm_recipe("pretrain.sh", "--data", tokenizer(tmp_path_factory)["data"], "--save-dir", tmp_path / "save",
                       "--init", "random", "--updates", "2", "--", "--arch", "unilmv2_tiny", "--max-update", "6",
                       "--batch-size", "8", "--num-workers", "0")
    assert ": 6 updates of 8 x 128 tokens, lr 3e-4, seed 1\n" in proc.stdout
    lrs = [float(r["lr"]) for r in records(proc)]
    assert len(lrs) == 6 and all(lr > 0 for lr in lrs[:-1]) and lrs[-1] == 0


def test_finetune_sh_schedule_and_its_line_follow_a_max_update_given_after_the_double_dash(tmp_path_factory,
                                                                                           tmp_path):
    """-- --max-update N is the run's length as --updates N is: the demo preset's schedule (40 pairs,
    batch 16, one epoch: 3 updates) had the lr at 0 from update 3 on, so the updates after it trained
    nothing, and the line said 6 updates."""
    from tiny_s2s import tiny_s2s

    _, data, _ = tiny_s2s(tmp_path_factory)
    proc = warm_recipe("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", "none", "--save-dir",
                       tmp_path / "save", "--", "--arch", "unilmv2_tiny", "--max-update", "6", "--disable-validation",
                       "--num-workers", "0", "--log-interval", "1")
    assert ": 40 pairs, 6 updates of 16, warmup 1," in proc.stdout, proc.stdout
    lrs = [float(r["lr"]) for r in records(proc)]
    assert len(lrs) == 6 and all(lr > 0 for lr in lrs[:-1]) and lrs[-1] == 0, lrs


def test_finetune_sh_schedule_and_its_line_count_the_batch_size_and_update_freq_given_after_the_double_dash(
        tmp_path_factory, tmp_path):
    """The demo preset's one epoch of 40 pairs with -- --batch-size 8 --update-freq 3: 24 pairs an update,
    2 updates. The schedule counted the preset's 16 (3 updates: 1.5 epochs trained) and the line said
    16; GLUE's and SQuAD's recipes ignored --update-freq alike (the lr stopped halfway down at their
    --max-epoch, or they trained twice the epochs)."""
    from tiny_s2s import tiny_s2s

    _, data, _ = tiny_s2s(tmp_path_factory)
    proc = warm_recipe("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", "none", "--save-dir",
                       tmp_path / "save", "--", "--arch", "unilmv2_tiny", "--batch-size", "8", "--update-freq", "3",
                       "--disable-validation", "--num-workers", "0", "--log-interval", "1")
    assert ": 40 pairs, 2 updates of 24, warmup 1," in proc.stdout, proc.stdout
    lrs = [float(r["lr"]) for r in records(proc)]
    epochs = {r["epoch"] for r in records(proc, "train")}
    assert len(lrs) == 2 and lrs[0] > 0 and lrs[-1] == 0 and epochs == {1}, (lrs, epochs)
    probe = ("source scripts/lib/common.sh; EXTRA=(--update-freq 2); per_update 16; echo $PER_UPDATE; "
             "PMLM_GPUS=4 per_update 16; echo $PER_UPDATE; "
             "EXTRA=(--update-freq 2 --distributed-world-size 2); PMLM_GPUS=4 per_update 16; echo $PER_UPDATE; "
             "EXTRA=(--update-freq 1,2); per_update 16")
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, cwd=REPO, env={**ENV, "PMLM_GPUS": "0"})
    assert out.stdout == "32\n128\n64\n" and out.returncode == 2 and "--update-freq 1,2: " in out.stderr, out


def test_fp16_for_fairseq_train_on_a_machine_without_a_gpu_is_one_line_before_anything_is_written(tmp_path):
    """fairseq-train's --fp16 asks CUDA for a device while it builds its optimizer: on a CPU machine
    a traceback after the set-up and the data. The training recipes (pre-training, GLUE and SQuAD
    fine-tuning) refuse it first, in one line
    (device_flags, common.sh); the same flag on a machine with a GPU, or decoding, is left alone."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.idx").touch()
    (tmp_path / "data" / "dict.txt").touch()
    (tmp_path / "ckpt.pt").touch()
    (tmp_path / "q.json").touch()
    ckpt = ("--checkpoint", tmp_path / "ckpt.pt")
    for script, flags in (("pretrain.sh", ("--init", "random")), ("glue/finetune_glue.sh", ckpt),
                          ("squad/finetune_squad.sh", (*ckpt, "--train-json", tmp_path / "q.json", "--dev-json",
                                                       tmp_path / "q.json"))):
        proc = subprocess.run(["bash", f"scripts/{script}", "--data", tmp_path / "data", "--save-dir",
                               tmp_path / "save", *flags, "--", "--arch", "unilmv2_tiny", "--fp16"],
                              capture_output=True, text=True, cwd=REPO, env={**ENV, "PMLM_GPUS": "0"})
        assert proc.returncode == 2 and proc.stderr == (
            f"{script}: error: --fp16 needs a CUDA GPU and this machine has none: leave it out "
            "(on a CPU with bf16: --bf16-autocast)\n"), (script, proc.stderr)
        assert not (tmp_path / "save").exists()
    check = "source scripts/lib/common.sh; EXTRA=(--fp16); PASS_TO=fairseq-{}; device_flags; echo ${{DEVICE[*]}}"
    assert [subprocess.run(["bash", "-c", check.format(cmd)], capture_output=True, text=True, cwd=REPO,
                           env={**ENV, "PMLM_GPUS": gpus}).stdout for cmd, gpus in
            (("train", "1"), ("generate", "0"))] == ["--fp16\n", "--cpu\n"]


def test_cpu_recipes_use_bf16_only_where_the_cpu_has_it_and_torch_is_not_held_to_avx2():
    """The CPU recipes add --bf16-autocast on a CPU with AVX512-BF16/AMX, but not under the
    emulation of an older CPU (ATEN_CPU_CAPABILITY=avx2), whose times the README states."""
    def flags(**env):
        out = subprocess.run(["bash", "-c", "source scripts/lib/common.sh; DEVICE=(--cpu); cpu_speed_flags; "
                              "echo \"${DEVICE[*]}\""], cwd=REPO, capture_output=True, text=True,
                             env={**{k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}, **env})
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    has_bf16 = any(w in open("/proc/cpuinfo").read().split() for w in ("avx512_bf16", "amx_bf16"))
    assert ("--bf16-autocast" in flags()) == has_bf16
    assert "--bf16-autocast" not in flags(ATEN_CPU_CAPABILITY="avx2")
