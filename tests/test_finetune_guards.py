"""The fine-tuning recipes never claim one init and train another: fairseq resumes a save dir's
checkpoint_last.pt whatever --finetune-from-model says, so the recipes resume it only when its
run started from the same --checkpoint (and say so), refuse in one line otherwise, and with
--force move the old checkpoints aside and start afresh (scripts/lib/common.sh, resume_or_start);
a checkpoint of another dictionary stops fine-tuning with one line naming both files and sizes."""
import os
import shutil

import pytest
import torch

from cli import USER_DIR, recipe, run
from tiny_s2s import finetune, tiny_s2s


def init_of(checkpoint):
    cfg = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)["cfg"]
    return cfg["checkpoint"]["finetune_from_model"]


def test_a_used_save_dir_is_resumed_only_from_its_own_init_else_refused_or_restarted_with_force(tmp_path_factory,
                                                                                               tmp_path):
    _, data, first = tiny_s2s(tmp_path_factory)
    other = tmp_path / "other.pt"  # another init: the first run's weights
    shutil.copy(first / "checkpoint_last.pt", other)
    save = tmp_path / "save"
    shutil.copytree(first, save)  # a save dir whose run started from random weights (none)

    refused = finetune(data, save, other, check=False)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines() == [refused.stderr.strip()]
    assert refused.stderr.startswith(f"s2s/finetune.sh: error: {save}/checkpoint_last.pt (task pmlm_seq2seq, "
                                     f"from none) is not a run from --checkpoint {other}")
    assert "--force" in refused.stderr and os.listdir(save) == os.listdir(first)  # nothing touched

    forced = finetune(data, save, other, "--force")
    aside = [d for d in os.listdir(save) if d.startswith("replaced-")]
    assert len(aside) == 1 and os.listdir(save / aside[0]) == ["checkpoint_last.pt"]
    assert f"moved the checkpoints of {save} to {save / aside[0]}; starting afresh from {other}" in forced.stdout
    assert init_of(save / "checkpoint_last.pt") == str(other)
    assert init_of(save / aside[0] / "checkpoint_last.pt") is None  # the old run, kept whole

    # the same init again (a relative path from elsewhere): fairseq resumes, and the recipe says so
    again = recipe("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", "other.pt",
                   "--save-dir", save, "--", "--arch", "unilmv2_tiny", "--max-update", "2", "--batch-size", "8",
                   "--disable-validation", "--num-workers", "0", cwd=tmp_path)
    assert f"s2s/finetune.sh: resuming {save}/checkpoint_last.pt (update 2 of a run from {other})" in again.stdout
    assert "init other.pt" in again.stdout and "Loaded checkpoint" in again.stdout

    # --force never moves the init itself out of the way
    inside = finetune(data, save, save / "checkpoint_last.pt", "--force", check=False)
    assert inside.returncode == 2 and inside.stderr == (
        f"s2s/finetune.sh: error: --checkpoint {save}/checkpoint_last.pt is in --save-dir {save}, "
        "which --force would empty\n")


def test_glue_and_squad_recipes_refuse_a_save_dir_of_another_run_too(tmp_path_factory, tmp_path):
    _, data, first = tiny_s2s(tmp_path_factory)
    init = first / "checkpoint_last.pt"
    (tmp_path / "train.json").write_text("{}")
    for name, args in (("glue/finetune_glue.sh", []),
                       ("squad/finetune_squad.sh", ["--train-json", tmp_path / "train.json",
                                                    "--dev-json", tmp_path / "train.json"])):
        proc = recipe(name, "--data", data, *args, "--checkpoint", init, "--save-dir", first, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"{name}: error: {first}/checkpoint_last.pt (task pmlm_seq2seq, from none) "
                                      f"is not a run from --checkpoint {init}"), proc.stderr
    assert sorted(os.listdir(first)) == ["checkpoint_last.pt", "dict.source.txt", "dict.target.txt", "spm.model"]


def test_fine_tuning_a_checkpoint_of_another_dictionary_stops_with_one_line_naming_both_and_their_sizes(
        tmp_path_factory, tmp_path):
    _, data, first = tiny_s2s(tmp_path_factory)
    init = first / "checkpoint_last.pt"
    other = tmp_path / "data"  # the same pairs, 8 more symbols in dict.txt
    shutil.copytree(data, other)
    with open(other / "dict.txt", "a") as f:
        f.write("".join(f"extra{i} 1\n" for i in range(8)))
    rows = torch.load(init, map_location="cpu", weights_only=True, mmap=True)["model"][
        "transformer.embed_tokens.weight"].size(0)
    proc = run("fairseq-train", other, "--user-dir", USER_DIR, "--task", "pmlm_seq2seq", "--criterion", "pmlm_seq2seq",
               "--arch", "unilmv2_tiny", "--finetune-from-model", init, "--optimizer", "adam", "--lr", "1e-4",
               "--batch-size", "8", "--max-update", "1", "--max-source-positions", "48", "--max-target-positions", "32",
               "--disable-validation", "--num-workers", "0", "--cpu", "--save-dir", tmp_path / "save", check=False)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        f"fairseq-train: error: {init} was trained with a different dictionary than {other}/dict.txt + [MASK] + [P] "
        f"({rows} rows against {rows + 8}): binarize the data with the checkpoint's dictionary "
        "(fairseq-preprocess --srcdict)")
    assert not os.path.exists(tmp_path / "save" / "checkpoint_last.pt")
    # the hub, with the same data, says the same (as a ValueError: no trainer replaces it there)
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    with pytest.raises(ValueError, match=rf"^{init} was trained with a different dictionary than {other}/dict.txt "
                                         rf"\+ \[MASK\] \+ \[P\] \({rows} rows against {rows + 8}\)"):
        UniLMv2Model.from_pretrained(str(first), data_name_or_path=str(other))


def test_sigterm_to_the_recipe_alone_reaches_training_which_saves_and_stops(tmp_path_factory, tmp_path):
    """Kubernetes signals PID 1, the recipe's shell: it forwards SIGTERM to fairseq-train, which
    saves checkpoint_last.pt at the next update and stops; the recipe exits 143 after it."""
    import signal
    import subprocess
    import time

    from cli import ENV, REPO

    _, data, _ = tiny_s2s(tmp_path_factory)
    save = tmp_path / "save"
    proc = subprocess.Popen(["bash", os.path.join(REPO, "scripts", "s2s", "finetune.sh"), "--preset", "demo",
                             "--data", str(data), "--checkpoint", "none", "--save-dir", str(save), "--",
                             "--arch", "unilmv2_tiny", "--max-update", "100000", "--batch-size", "8",
                             "--disable-validation", "--num-workers", "0", "--log-interval", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **ENV})
    seen = ""
    deadline = time.time() + 120
    while '"num_updates": "3"' not in seen and time.time() < deadline:  # training is under way
        seen += proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)  # to the shell only, not its process group
    out = seen + proc.communicate(timeout=120)[0]
    assert proc.returncode == 143, out[-2000:]
    saved = [line for line in out.splitlines() if line.startswith("pmlm: SIGTERM received: saved")]
    assert len(saved) == 1 and str(save / "checkpoint_last.pt") in saved[0], out[-2000:]
    assert os.path.isfile(save / "checkpoint_last.pt")


@pytest.mark.parametrize("flags", [["--reset-optimizer", "--reset-meters"], ["--restore-file", "RUN"]])
def test_a_reset_or_restore_flag_beside_the_recipes_checkpoint_is_one_line_naming_both(tmp_path_factory, tmp_path,
                                                                                        flags):
    """The recipes pass --checkpoint as --finetune-from-model, which fairseq refuses beside --reset-* or
    --restore-file: a ValueError traceback about a flag the user never typed (with --restore-file, the
    whole config in it)."""
    _, data, first = tiny_s2s(tmp_path_factory)
    init = first / "checkpoint_last.pt"
    flags = [str(init) if f == "RUN" else f for f in flags]
    proc = recipe("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", init, "--save-dir",
                  tmp_path / "save", "--", *flags, "--max-update", "2", "--batch-size", "8", "--disable-validation",
                  "--num-workers", "0", check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq-train: error: ") and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    named = " ".join(flags[:1] if flags[0] == "--restore-file" else flags)
    assert named in last and f"--finetune-from-model {init} (the fine-tuning recipes' --checkpoint)" in last
    assert not os.path.exists(tmp_path / "save" / "checkpoint_last.pt")


def test_s2s_fine_tuning_with_a_best_metric_validation_never_logs_stops_before_training(tmp_path_factory, tmp_path):
    """--best-checkpoint-metric rouge (validation decodes nothing): fairseq's KeyError traceback
    after the first validation, the epoch before it lost; wps, a meter fairseq logs, still trains."""
    _, data, _ = tiny_s2s(tmp_path_factory)
    common = ["--preset", "demo", "--data", data, "--checkpoint", "none", "--", "--arch", "unilmv2_tiny",
              "--max-update", "1", "--batch-size", "8", "--num-workers", "0"]
    proc = recipe("s2s/finetune.sh", "--save-dir", tmp_path / "rouge", *common, "--best-checkpoint-metric", "rouge",
                  check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "fairseq-train: error: --best-checkpoint-metric rouge: pmlm_seq2seq's validation logs loss, nll_loss, ppl, "
        "accuracy (it decodes nothing: ROUGE comes from scripts/s2s/generate.sh after training)")
    assert "train_inner" not in proc.stdout and not os.path.exists(tmp_path / "rouge" / "checkpoint_last.pt")
    recipe("s2s/finetune.sh", "--save-dir", tmp_path / "wps", *common, "--best-checkpoint-metric", "wps")
