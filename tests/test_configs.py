"""configs/: fairseq's hydra CLI builds the trainer from each config and trains one update on the
CPU at a tiny size (the paper's settings otherwise as written): the configs name only options that
exist, in the groups where fairseq looks for them."""
import os

import pytest
import torch

from cli import REPO, run
from nlu import tokenizer
from tiny_s2s import tiny_s2s

TINY = ["model.encoder_layers=2", "model.encoder_embed_dim=64", "model.encoder_ffn_embed_dim=128",
        "model.encoder_attention_heads=4"]


def hydra_train(config, save, *overrides):
    group, name = config.split("/")
    run("fairseq-hydra-train", "--config-dir", os.path.join(REPO, "configs", group),
        "--config-name", name, f"common.user_dir={REPO}/fairseq_pmlm", "common.fp16=false", "common.cpu=true",
        "optimization.max_update=1", "optimization.update_freq=[1]", "dataset.num_workers=0",
        "dataset.disable_validation=true", f"checkpoint.save_dir={save}", f"hydra.run.dir={save}/hydra", *TINY,
        *overrides)
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
    assert cfg["task"]["pseudo_draw"] is True  # as the preset finetune.sh runs


@pytest.mark.parametrize("doc,configs", [
    ("PRETRAINING.md", ("fairseq_pmlm.tasks.pseudo_masked_lm:PseudoMaskedLMConfig",)),
    ("SEQ2SEQ.md", ("fairseq_pmlm.tasks.pmlm_seq2seq:PMLMSeq2SeqConfig",)),
])
def test_the_docs_tables_of_flags_give_the_defaults_the_code_has(doc, configs):
    """Each row `| `--a`, `--b` (model) | A, B | ... |` of the doc's flag table: the task's (or, marked
    "(model)", the model's) dataclass has the same defaults; "off" is False, "(none)" empty."""
    import dataclasses
    import importlib
    import re

    from fairseq_pmlm.models.unilmv2 import UniLMv2Config

    def defaults(path):
        module, name = path.split(":")
        return {f.name: f.default for f in dataclasses.fields(getattr(importlib.import_module(module), name))}

    task = {k: v for path in configs for k, v in defaults(path).items()}
    model = {f.name: f.default for f in dataclasses.fields(UniLMv2Config)}
    rows = re.findall(r"^\| (`--[^|]*?)(?: \((model)\))? \| ([^|]+?) \|", open(os.path.join(REPO, "docs", doc)).read(),
                      re.MULTILINE)
    assert len(rows) >= 4, rows
    for flags, of_model, values in rows:
        names = [f.strip("` ").lstrip("-").replace("-", "_") for f in flags.split(",")]
        for name, value in zip(names, values.split(", "), strict=True):
            want = (model if of_model else task)[name]
            shown = "off" if want is False else "(none)" if want in ("", None) else str(want)
            assert value.strip("`") == shown, (doc, name, value, want)


def test_an_arch_name_the_configs_sizes_override_is_said_once_not_silently_ignored(monkeypatch, caplog):
    """fairseq-hydra-train fills a dataclass model's config with its defaults (base sizes) before the
    arch function runs, so model._name=unilmv2_small built a base model without a word; fairseq-train's
    --arch leaves the sizes unset until the arch function, which sets them."""
    import argparse
    import logging

    from fairseq.dataclass.utils import merge_with_parent
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from omegaconf import OmegaConf

    from fairseq_pmlm.models import unilmv2

    monkeypatch.setattr(unilmv2, "_TOLD_SIZES", set())
    sizes = ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads")
    args = argparse.Namespace()
    with caplog.at_level(logging.WARNING):
        ARCH_CONFIG_REGISTRY["unilmv2_small"](args)  # fairseq-train --arch unilmv2_small
        assert tuple(getattr(args, f) for f in sizes) == (4, 256, 1024, 4) and "unilmv2_small" not in caplog.text
        cfg = merge_with_parent(unilmv2.UniLMv2Config(), OmegaConf.create({"_name": "unilmv2_small"}))  # add_defaults
        for _ in range(2):  # fairseq calls it once a build
            ARCH_CONFIG_REGISTRY["unilmv2_small"](cfg)
    assert tuple(cfg[f] for f in sizes) == (12, 768, 3072, 12)
    assert caplog.text.count("unilmv2_small: building 12 layers x 768 (FFN 3072, 12 heads), not the arch's 4 layers "
                             "x 256 (FFN 1024, 4 heads): the sizes given win") == 1
