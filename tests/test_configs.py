"""configs/: fairseq's hydra CLI builds the trainer from each config and trains one update on the
CPU at a tiny size (the paper's settings otherwise as written): the configs name only options that
exist, in the groups where fairseq looks for them."""
import os
import subprocess

import pytest
import torch

from cli import ENV, REPO
from nlu import tokenizer
from tiny_s2s import tiny_s2s

TINY = ["model.encoder_layers=2", "model.encoder_embed_dim=64", "model.encoder_ffn_embed_dim=128",
        "model.encoder_attention_heads=4"]


def hydra_train(config, save, *overrides):
    group, name = config.split("/")
    proc = subprocess.run(
        ["fairseq-hydra-train", "--config-dir", os.path.join(REPO, "configs", group),
         "--config-name", name, f"common.user_dir={REPO}/fairseq_pmlm", "common.fp16=false", "common.cpu=true",
         "optimization.max_update=1", "optimization.update_freq=[1]", "dataset.num_workers=0",
         "dataset.disable_validation=true", f"checkpoint.save_dir={save}", f"hydra.run.dir={save}/hydra", *TINY,
         *overrides], capture_output=True, text=True, env={**os.environ, **ENV}, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    return state["cfg"]


def test_the_pretraining_config_trains_pmlm_with_the_papers_optimiser(tmp_path_factory, tmp_path):
    data = tokenizer(tmp_path_factory)["data"]
    cfg = hydra_train("pretraining/unilmv2_base", tmp_path, f"task.data={data}", "dataset.batch_size=4",
                      "task.tokens_per_sample=64")
    assert cfg["task"]["_name"] == "pseudo_masked_lm" and cfg["task"]["objective"] == "ae+par"
    assert cfg["criterion"]["_name"] == "pmlm" and cfg["optimization"]["lr"] == [0.0006]
    assert cfg["optimizer"]["adam_betas"] == "(0.9,0.98)" and cfg["lr_scheduler"]["warmup_updates"] == 24000
    assert cfg["model"]["encoder_layers"] == 2  # the override reached the model


@pytest.mark.parametrize("name,source,target", [("cnndm", 608, 160), ("xsum", 720, 48)])
def test_the_finetuning_configs_train_seq2seq_from_a_checkpoint(tmp_path_factory, tmp_path, name, source, target):
    _, data, save = tiny_s2s(tmp_path_factory)
    cfg = hydra_train(f"finetuning/{name}", tmp_path, f"task.data={data}",
                      f"checkpoint.finetune_from_model={save / 'checkpoint_last.pt'}",
                      "dataset.batch_size=8")
    assert cfg["task"]["_name"] == "pmlm_seq2seq" and cfg["criterion"]["label_smoothing"] == 0.1
    assert (cfg["task"]["max_source_positions"], cfg["task"]["max_target_positions"]) == (source, target)
