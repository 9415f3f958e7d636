"""`fairseq-train --user-dir fairseq_pmlm` end to end, through the real command line: it learns,
saves checkpoints torch can load safely, resumes exactly, runs every ablation, logs its metrics.

All runs of this file are independent of each other except the resumed ones, so the module
fixture ``jobs`` starts them all at once in cli.py's two-worker pool; each test waits for
the runs it reads. Every run is a fairseq-train process (from cli.py's warm process: no ~6 s
of imports each); the six 3-update runs go one after the other (cli.train_many).
"""
import math
import shutil

import pytest
import torch

from cli import checkpoints, records, shared_corpus, submit, train, train_many

OBJECTIVES = ["ae", "par", "ar", "ae+ar", "ae+par"]
# docs/DESIGN.md §3 / paper Table 6: which losses each objective has
LOSSES = {"ae": {"ae"}, "par": {"par"}, "ar": {"par"}, "ae+ar": {"ae", "par"}, "ae+par": {"ae", "par"}}

LEARN = ["--max-update", "240", "--log-interval", "20", "--lr-scheduler", "inverse_sqrt",
         "--warmup-updates", "20", "--dropout", "0", "--attention-dropout", "0",
         "--no-epoch-checkpoints", "--validate-interval", "1000", "--save-interval", "1000"]
# 4 updates an epoch; update 6 is mid-epoch 2, checkpoint1.pt is the end of epoch 1 (update 4);
# from either, the resumed run crosses at least one epoch boundary (8) on its way to 12
RESUME = ["--log-interval", "1", "--save-interval-updates", "6", "--max-update", "12"]
SHORT = ["--max-update", "3", "--log-interval", "1"]


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    return shared_corpus(tmp_path_factory)


@pytest.fixture(scope="module")
def jobs(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    j = {"root": root}
    j["learn"] = submit(train, data, root / "learn", *LEARN)
    j["resume_a"] = submit(train, data, root / "a", *RESUME)
    # the short runs, one after the other (cli.train_many)
    short = [(data, root / objective, "--objective", objective, "--no-save", *SHORT) for objective in OBJECTIVES]
    short.append((data, root / "no_rel_pos", "--no-rel-pos", "--no-epoch-checkpoints", *SHORT))
    short.append((data, root / "ema", "--store-ema", "--ema-decay", "0.5", "--ema-start-update", "0",
                  "--no-epoch-checkpoints", *SHORT))
    j["short"] = submit(train_many, short)
    # a start of one update, then 3 updates from it of which the first 2 train the LM head alone
    head = ["--no-epoch-checkpoints", "--log-interval", "1"]
    start = root / "hw_start" / "checkpoint_last.pt"
    j["head_warmup"] = submit(train_many, [
        (data, root / "hw_start", "--max-update", "1", *head),
        (data, root / "hw", "--finetune-from-model", start,
         "--head-warmup-updates", "2", "--max-update", "3", "--save-interval-updates", "2", *head),
        # fairseq's --fp16 optimizer (here without its flat copy, which the CPU cannot place): refused
        (data, root / "hw_fp16", "--finetune-from-model", start, "--head-warmup-updates", "2", "--max-update", "3",
         "--fp16", "--fp16-no-flatten-grads", *head)])
    return j


def test_head_warmup_under_fp16s_optimizer_is_refused_at_its_first_update(jobs):
    """fairseq's --fp16 optimizer steps an fp32 copy of every parameter and gives a missing gradient
    zeros, which Adam steps (weight decay, its step count): the body moved during the warm-up."""
    fp16 = jobs["head_warmup"].result()[2]
    assert fp16.returncode == 2 and fp16.stderr.strip().splitlines()[-1] == (
        "fairseq-train: error: --head-warmup-updates: the LM head trains alone for 2 updates, but --fp16's "
        "optimizer steps every parameter, a frozen one too (weight decay, Adam's step count): use "
        "--memory-efficient-fp16 or --bf16-autocast for this run, or --head-warmup-updates 0")
    assert not (jobs["root"] / "hw_fp16" / "checkpoint_last.pt").exists()


def short_run(jobs, name):
    """One of the short runs: an objective, "no_rel_pos" or "ema"."""
    return jobs["short"].result()[(OBJECTIVES + ["no_rel_pos", "ema"]).index(name)]


def by_update(proc):
    """train_inner records (log interval 1) keyed by update number."""
    return {int(r["num_updates"]): r for r in records(proc)}


def test_pretraining_learns_a_memorisable_corpus(jobs):
    log = records(jobs["learn"].result())
    assert [int(r["num_updates"]) for r in log] == list(range(20, 241, 20))
    first, last = log[0], log[-1]  # means over updates 1-20 and 221-240
    for key in ("loss", "ae_loss", "par_loss"):
        # a model that ignored the context would plateau at the unigram entropy, 5.15 bits a
        # token, about 0.93x the mean of updates 1-20 (~5.5 bits for each of AE and PAR)
        assert float(last[key]) < 0.3 * float(first[key]), (key, first[key], last[key])
    for key in ("ae_acc", "par_acc"):
        assert float(last[key]) > 85, (key, last)
    assert all(math.isfinite(float(r["loss"])) for r in log)
    valid = records(jobs["learn"].result(), "valid")[-1]
    assert float(valid["valid_ae_acc"]) > 80 and float(valid["valid_par_acc"]) > 80, valid


def test_checkpoints_exist_and_load_with_torch_weights_only_default(jobs, data):
    save_dir = jobs["root"] / "learn"
    jobs["learn"].result()
    assert checkpoints(save_dir) == ["checkpoint_best.pt", "checkpoint_last.pt"]
    for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
        state = torch.load(save_dir / name)  # torch >= 2.6: weights_only=True by default
        torch.load(save_dir / name, weights_only=True)  # (and so whatever the default)
        assert state["cfg"]["model"]["_name"] == "unilmv2_tiny"
        assert state["cfg"]["task"]["_name"] == "pseudo_masked_lm"
        assert "transformer.rel_pos_bias.weight" in state["model"]
        assert state["model"]["dictionary_digest"].dtype == torch.float32  # averageable (models/unilmv2.py)
        assert state["optimizer_history"][-1]["num_updates"] == 240

    # and fairseq can rebuild the trained model from it (in-process, same code as the CLIs)
    from fairseq import checkpoint_utils

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(save_dir / "checkpoint_last.pt")], arg_overrides={"data": str(data)}
    )
    params = dict(models[0].state_dict())
    saved = torch.load(save_dir / "checkpoint_last.pt")["model"]
    assert params.keys() == saved.keys()
    assert all(torch.equal(params[k], saved[k]) for k in saved)
    assert task.cfg.tokens_per_sample == 64


@pytest.fixture(scope="module")
def resumed(jobs, data):
    """Run B: a fresh save dir whose checkpoint_last.pt is one of run A's checkpoints."""
    jobs["resume_a"].result()
    a, out = jobs["root"] / "a", {}
    for name, start in (("checkpoint_2_6.pt", "mid_epoch"), ("checkpoint1.pt", "epoch_end")):
        b = jobs["root"] / f"b_{start}"
        b.mkdir()
        shutil.copy(a / name, b / "checkpoint_last.pt")
        out[start] = (b, submit(train, data, b, *RESUME))
    return out


@pytest.mark.parametrize("start,first_update", [("mid_epoch", 7), ("epoch_end", 5)])
def test_resuming_checkpoint_last_continues_exactly(start, first_update, jobs, resumed):
    """checkpoint_2_6.pt: 2 of epoch 2's 4 batches done (the important case: fairseq must
    skip them and the masks must not change); checkpoint1.pt: at the end of epoch 1."""
    a_proc = jobs["resume_a"].result()
    assert sorted(checkpoints(jobs["root"] / "a")) == [
        "checkpoint1.pt", "checkpoint2.pt", "checkpoint3.pt", "checkpoint_2_6.pt",
        "checkpoint_best.pt", "checkpoint_last.pt"]  # update 12 ends epoch 3: checkpoint3.pt
    b_dir, b_job = resumed[start]
    a, b = by_update(a_proc), by_update(b_job.result())
    assert sorted(a) == list(range(1, 13))
    assert sorted(b) == list(range(first_update, 13)), "it did not continue from the checkpoint"
    for u in b:  # every logged number of every update (3 decimals in the log) ...
        same = ("epoch", "update", "loss", "ae_loss", "par_loss", "masked", "ae_acc", "par_acc",
                "gnorm", "lr", "wpb", "bsz")
        assert {k: a[u][k] for k in same} == {k: b[u][k] for k in same}, u
    # ... and the final weights to 1e-6 (on one CPU thread they are bit-identical)
    wa = torch.load(jobs["root"] / "a" / "checkpoint_last.pt")["model"]
    wb = torch.load(b_dir / "checkpoint_last.pt")["model"]
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], rtol=0, atol=1e-6, msg=k)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_every_ablation_objective_trains_and_logs_its_losses(objective, jobs):
    proc = short_run(jobs, objective)
    assert proc.returncode == 0, proc.stdout[-3000:]
    log = records(proc)
    assert [int(r["num_updates"]) for r in log] == [1, 2, 3]
    valid = records(proc, "valid")[-1]
    for name in ("ae", "par"):
        present = name in LOSSES[objective]
        for r, prefix in [(rec, "") for rec in log] + [(valid, "valid_")]:
            assert (f"{prefix}{name}_loss" in r) == present, (objective, name, r)
            assert (f"{prefix}{name}_acc" in r) == present, (objective, name, r)
    for r in log:
        assert math.isfinite(float(r["loss"])) and int(r["masked"]) > 0
        parts = sum(float(r[f"{n}_loss"]) for n in LOSSES[objective])
        assert abs(float(r["loss"]) - parts) < 0.01, r  # L = L_AE + L_PAR (each per masked token)
    assert checkpoints(jobs["root"] / objective) == []  # --no-save


def test_no_rel_pos_trains_a_model_without_the_bias_table(jobs):
    proc = short_run(jobs, "no_rel_pos")
    assert proc.returncode == 0, proc.stdout[-3000:]
    log = records(proc)
    assert [int(r["num_updates"]) for r in log] == [1, 2, 3]
    assert all(math.isfinite(float(r["loss"])) for r in log)
    state = torch.load(jobs["root"] / "no_rel_pos" / "checkpoint_last.pt")
    assert state["cfg"]["model"]["no_rel_pos"] is True
    assert not any("rel_pos" in k for k in state["model"])


def test_an_ema_of_the_weights_is_kept_and_loads_with_the_records_the_model_wrote(jobs, data):
    """fairseq's --store-ema decays every state-dict entry in place at each update (a uint8 or bool
    entry stopped the run at its first update): the run trains, and the EMA's weights, taken out as
    fairseq's load_ema_from_checkpoint does, load into the model with the dictionary's digest and the
    head's record as the model wrote them (the EMA leaves the digest only within rounding)."""
    from fairseq import checkpoint_utils

    proc = short_run(jobs, "ema")
    assert proc.returncode == 0, proc.stdout[-3000:]
    path = jobs["root"] / "ema" / "checkpoint_last.pt"
    ema, model = checkpoint_utils.load_ema_from_checkpoint(str(path)), torch.load(path)["model"]
    fc1 = "transformer.layers.0.fc1.weight"
    assert not torch.equal(ema["model"][fc1], model[fc1])  # an average of the updates, not a copy
    torch.save(ema, jobs["root"] / "ema" / "ema.pt")
    (loaded,), _ = checkpoint_utils.load_model_ensemble([str(jobs["root"] / "ema" / "ema.pt")],
                                                        arg_overrides={"data": str(data)})
    assert torch.equal(loaded.state_dict()[fc1], ema["model"][fc1])
    assert torch.equal(loaded.dictionary_digest, model["dictionary_digest"]) and loaded.lm_head_trained.item() == 1


def test_logs_carry_masked_count_and_both_accuracies(jobs):
    proc = jobs["resume_a"].result()
    for tag, prefix in (("train_inner", ""), ("train", "train_"), ("valid", "valid_")):
        recs = records(proc, tag)
        assert recs, tag
        for r in recs:
            for key in ("loss", "ae_loss", "par_loss", "masked", "ae_acc", "par_acc"):
                assert prefix + key in r, (tag, key, r)
            assert 0 <= float(r[prefix + "ae_acc"]) <= 100 and 0 <= float(r[prefix + "par_acc"]) <= 100
    # `masked` means what it says: per batch, at least 15% of the context's non-special tokens
    # (AE+PAR: a batch token is a context token, or the [P] or the original copy of a masked
    # one; each context has 3 special tokens; a last block may overshoot 15% a little)
    for r in records(proc):
        masked, tokens, examples = int(r["masked"]), float(r["wpb"]), int(r["bsz"])
        body = tokens - 2 * masked - 3 * examples
        assert 0.15 <= masked / body <= 0.45, r


def test_head_warmup_updates_train_the_lm_head_alone_then_everything(jobs):
    assert [r.returncode for r in jobs["head_warmup"].result()[:2]] == [0, 0]
    start = torch.load(jobs["root"] / "hw_start" / "checkpoint_last.pt")["model"]
    warm = torch.load(jobs["root"] / "hw" / "checkpoint_1_2.pt")["model"]  # after the 2 head-only updates
    last = torch.load(jobs["root"] / "hw" / "checkpoint_last.pt")["model"]
    head = [k for k in start if k.startswith("transformer.lm_head.") and k != "transformer.lm_head.weight"]
    body = [k for k in start if k not in head and k != "dictionary_digest"]
    assert sorted(head) == ["transformer.lm_head.bias", "transformer.lm_head.dense.bias",
                            "transformer.lm_head.dense.weight", "transformer.lm_head.ln.bias",
                            "transformer.lm_head.ln.weight"]
    for k in body:  # the embedding (tied to the output projection) and every layer: untouched
        assert torch.equal(warm[k], start[k]), k
    assert all(not torch.equal(warm[k], start[k]) for k in head)
    assert not torch.equal(last["transformer.embed_tokens.weight"], start["transformer.embed_tokens.weight"])
    assert not torch.equal(last["transformer.layers.0.fc1.weight"], start["transformer.layers.0.fc1.weight"])
