"""Checkpoints saved before the Transformer's shape became one dataclass still load: the fixture
holds three tiny unilmv2 checkpoints written by that code (fairseq-train's relative-bias model, one
trained with --no-rel-pos, and one the converter made from a BERT, which recorded both
``rel_pos_buckets`` 0 and ``no_rel_pos``), with their hidden states on one input."""
import os
from collections import OrderedDict
from types import SimpleNamespace

import pytest
import torch
from fairseq.models import build_model
from omegaconf import OmegaConf

from fairseq_pmlm.weights.checkpoint import flags_of_checkpoint

from helpers import make_dictionary

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "old_unilmv2_checkpoints.pt")
OLD = torch.load(FIXTURE, weights_only=True)
FLAGS = {  # what --finetune-from-model needs to rebuild each
    "rel": ["--rel-pos-buckets=8", "--max-rel-distance=16"],
    "no_rel_pos": ["--no-rel-pos"],
    "converted_bert": ["--no-rel-pos"],
}
SIZES = ["--encoder-layers=1", "--encoder-embed-dim=16", "--encoder-ffn-embed-dim=32", "--encoder-attention-heads=2",
         "--max-positions=32"]


@pytest.mark.parametrize("from_checkpoint", [True, False], ids=["generate-and-hub", "restore"])
@pytest.mark.parametrize("name", list(FLAGS))
def test_an_old_checkpoint_builds_the_same_model_and_gives_the_same_outputs(name, from_checkpoint):
    d = make_dictionary(n_words=12)
    assert d.symbols == OLD["symbols"]
    old = OLD[name]
    task = SimpleNamespace(source_dictionary=d, cfg=OmegaConf.create({"_name": "pseudo_masked_lm"}))
    # as fairseq's load_model_ensemble_and_task builds it from the checkpoint's cfg
    model = build_model(OmegaConf.create(old["cfg"]["model"]), task, from_checkpoint=from_checkpoint)
    model.load_state_dict(old["model"], strict=True)
    assert (model.transformer.rel_pos_bias is None) == (name != "rel")
    with torch.no_grad():
        features = model.eval()(OLD["tokens"], features_only=True)[0]
    assert torch.allclose(features, old["features"], atol=1e-6)


@pytest.mark.parametrize("name", list(FLAGS))
def test_the_flags_that_rebuild_an_old_checkpoint(name, tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"cfg": OLD[name]["cfg"]}, path)
    assert flags_of_checkpoint(str(path)) == ["--arch", "unilmv2", *SIZES, *FLAGS[name]]


def test_numpy_metric_values_are_saved_as_python_numbers_and_files_holding_them_still_load(tmp_path):
    """fairseq keeps the best --best-checkpoint-metric value as computed: a numpy scalar for scipy's
    (STS-B's Pearson), which weights_only loading refused: such a checkpoint could be neither resumed
    nor loaded by the hub. Saved as Python numbers; older files still load."""
    import numpy as np
    from fairseq import checkpoint_utils

    from fairseq_pmlm.runtime import checkpoint_files

    weights = OrderedDict(w=torch.ones(2))
    weights._metadata = {"": {"version": 1}}  # a state dict's, which must survive the save
    state = {"model": weights, "extra_state": {"best": np.float64(97.3), "val_loss": np.float64(97.3)},
             "optimizer_history": [{"num_updates": 3, "lr_scheduler_state": {"best": np.float64(97.3)}}]}
    older = tmp_path / "older.pt"
    torch.save(state, older)  # as fairseq wrote it before
    assert checkpoint_files.read(str(older))["extra_state"]["best"] == 97.3
    saved = tmp_path / "checkpoint_best.pt"
    checkpoint_utils.torch_persistent_save(state, str(saved))  # the plugin's (importing it installs it)
    again = torch.load(saved, weights_only=True)  # plain torch, nothing allowed beyond its defaults
    assert type(again["extra_state"]["best"]) is float and again["extra_state"]["val_loss"] == 97.3
    assert type(again["optimizer_history"][0]["lr_scheduler_state"]["best"]) is float
    assert again["model"]._metadata == {"": {"version": 1}} and torch.equal(again["model"]["w"], torch.ones(2))
    assert type(state["extra_state"]["best"]) is np.float64  # the caller's objects are left as they are
