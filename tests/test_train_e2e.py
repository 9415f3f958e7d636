"""`fairseq-train --user-dir fairseq_pmlm` end to end: learns, checkpoints, resumes exactly."""
import shutil

import pytest
import torch

from cli import memorisable_documents, preprocess, records, train


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return preprocess(tmp_path_factory.mktemp("corpus"), memorisable_documents())


def test_pretraining_learns_a_memorisable_corpus_and_saves_loadable_checkpoints(data, tmp_path):
    proc = train(data, tmp_path / "ckpt", "--max-update", "250", "--log-interval", "25",
                 "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "20", "--no-epoch-checkpoints",
                 "--validate-interval", "1000", "--save-interval", "1000",  # validate + save at the end
                 "--dropout", "0.0", "--attention-dropout", "0.0")
    log = records(proc.stdout + proc.stderr)
    first, last = log[0], log[-1]
    for key in ("ae_loss", "par_loss"):
        assert float(last[key]) < 0.5 * float(first[key]), (key, first[key], last[key])
    assert float(last["ae_acc"]) > 50 and float(last["par_acc"]) > 50, last
    assert int(last["masked"]) > 0
    for name in ("checkpoint_last.pt", "checkpoint_best.pt"):
        state = torch.load(tmp_path / "ckpt" / name)  # torch's default weights_only=True
        assert state["cfg"]["model"]["_name"] == "unilmv2_tiny"
        assert "transformer.rel_pos_bias.weight" in state["model"]


def test_resuming_checkpoint_last_continues_with_the_same_losses(data, tmp_path):
    common = ["--log-interval", "1", "--save-interval-updates", "6", "--max-update", "12",
              "--validate-interval", "1000", "--save-interval", "1000"]
    full = train(data, tmp_path / "a", *common)
    a = {int(r["num_updates"]): r["loss"] for r in records(full.stdout + full.stderr)}
    (tmp_path / "b").mkdir()
    (mid,) = (tmp_path / "a").glob("checkpoint_*_6.pt")
    shutil.copy(mid, tmp_path / "b" / "checkpoint_last.pt")
    resumed = train(data, tmp_path / "b", *common)
    b = {int(r["num_updates"]): r["loss"] for r in records(resumed.stdout + resumed.stderr)}
    assert sorted(b) == list(range(7, 13))  # it continued from update 6 (mid-epoch)
    assert all(a[u] == b[u] for u in b), (a, b)


@pytest.mark.parametrize("objective,logged,absent", [
    ("ae", "ae_loss", "par_loss"), ("par", "par_loss", "ae_loss"), ("ar", "par_loss", "ae_loss"),
    ("ae+ar", "par_loss", None), ("ae+par", "ae_loss", None),
])
def test_every_ablation_objective_trains_and_logs_its_losses(objective, logged, absent, data, tmp_path):
    proc = train(data, tmp_path, "--objective", objective, "--max-update", "3", "--log-interval", "1",
                 "--no-save", *(["--no-rel-pos"] if objective == "ae" else []))
    log = records(proc.stdout + proc.stderr)
    assert len(log) == 3 and logged in log[-1]
    if absent:
        assert absent not in log[-1]
    else:
        assert "ae_acc" in log[-1] and "par_acc" in log[-1]
