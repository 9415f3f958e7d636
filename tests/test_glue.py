"""Sentence(-pair) classification and regression through fairseq's own sentence_prediction
task and criterion (docs/DESIGN.md §6), and the GLUE recipe (scripts/glue/) end to end:
TSV folder -> sentencepiece -> binarized with the pre-training dictionary -> fine-tuned from
a pre-trained unilmv2 checkpoint -> the task's dev metric.
"""
import os
import subprocess
import sys

import pytest
import torch
from fairseq.data import Dictionary

from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model, dictionary_digest, nlu_layout
from fairseq_pmlm.public_data import glue
from fairseq_pmlm.public_data.glue_tsv import TASKS, GlueFormatError, read_glue_tsv

from cli import REPO, run_main, run_script
from helpers import make_dictionary
from nlu import glue_recipe, prepare_glue, tokenizer


def tiny_model(d, seed=0):
    torch.manual_seed(seed)
    cfg = UniLMv2Config(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64, encoder_attention_heads=4)
    return UniLMv2Model(cfg, d).eval()


def sentence_prediction_dictionary(pmlm_dict, tmp_path):
    """What fairseq's sentence_prediction task loads: dict.txt + <mask>."""
    pmlm_dict.save(str(tmp_path / "dict.txt"))  # writes dict.txt's symbols plus [MASK] [P]
    lines = (tmp_path / "dict.txt").read_text().splitlines()[:-2]
    (tmp_path / "dict.txt").write_text("\n".join(lines) + "\n")
    d = Dictionary.load(str(tmp_path / "dict.txt"))
    d.add_symbol("<mask>")
    return d


# ---------------------------------------------------------------- model side, in process

def test_pair_segment_ids_switch_after_the_first_eos():
    d = make_dictionary()
    s, e, p, w = d.bos(), d.eos(), d.pad(), d.nspecial
    tokens = torch.tensor([[s, w, w, e, w, w, w, e],
                           [s, w, e, w, e, p, p, p],
                           [s, w, w, w, e, p, p, p]])  # a single sentence: all segment A
    positions, segments, kinds, steps = nlu_layout(tokens, p, e)
    assert segments.tolist() == [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0, 0], [0] * 8]  # padding: 0
    assert kinds.tolist()[1] == [1, 1, 1, 1, 1, 0, 0, 0] and not steps.any()  # CONTEXT, PAD
    assert positions[2].tolist() == list(range(8))


def test_classification_logits_depend_on_the_derived_segments():
    """The same tokens with the segment embedding of B zeroed give other logits: the model
    really feeds the derived segment ids (a pair is not read as one sentence)."""
    d = make_dictionary()
    model = tiny_model(d)
    model.register_classification_head("h", num_classes=3)
    model.eval()
    w = d.nspecial
    tokens = torch.tensor([[d.bos(), w, w + 1, d.eos(), w + 2, w + 3, d.eos()]])
    with torch.no_grad():
        pair = model(tokens, features_only=True, classification_head_name="h")[0]
        model.transformer.embed_segments.weight[1] = model.transformer.embed_segments.weight[0]
        as_one = model(tokens, features_only=True, classification_head_name="h")[0]
    assert pair.shape == (1, 3) and not torch.allclose(pair, as_one)


def test_fairseq_sentence_prediction_dictionary_matches_the_pretraining_layout(tmp_path):
    pmlm = make_dictionary()
    theirs = sentence_prediction_dictionary(pmlm, tmp_path)
    model = tiny_model(theirs)
    assert len(theirs) == len(pmlm) - 1  # <mask> in [MASK]'s place, no [P]
    assert theirs.index("<mask>") == pmlm.index("[MASK]")
    assert model.transformer.embed_tokens.num_embeddings == len(pmlm)
    assert torch.equal(model.dictionary_digest, dictionary_digest(pmlm))


def test_missing_head_is_added_and_a_head_of_other_size_replaced(tmp_path):
    d = make_dictionary()
    pretrained_state = tiny_model(d, seed=1).state_dict()  # no heads, as after pre-training
    model = tiny_model(d, seed=2)
    model.register_classification_head("glue", num_classes=3)
    fresh = {k: v.clone() for k, v in model.classification_heads.state_dict().items()}
    model.load_state_dict(dict(pretrained_state), strict=True)
    assert torch.equal(model.transformer.embed_tokens.weight, pretrained_state["transformer.embed_tokens.weight"])
    assert all(torch.equal(v, model.classification_heads.state_dict()[k]) for k, v in fresh.items())
    # a fine-tuned checkpoint's 2-class head cannot fill a 3-class head: dropped, current one kept
    other = tiny_model(d, seed=3)
    other.register_classification_head("glue", num_classes=2)
    model.load_state_dict(dict(other.state_dict()), strict=True)
    assert model.classification_heads["glue"].out_proj.out_features == 3
    assert all(torch.equal(v, model.classification_heads.state_dict()[k]) for k, v in fresh.items())


def test_inputs_without_sos_fail_naming_the_flag():
    d = make_dictionary()
    model = tiny_model(d)
    model.register_classification_head("h", num_classes=2)
    with pytest.raises(ValueError, match="--init-token 0"):
        model(torch.tensor([[d.nspecial, d.eos()]]), features_only=True, classification_head_name="h")


# ---------------------------------------------------------------- GLUE TSV reading

def write(path, text):
    path.write_text(text)
    return path


def test_tsv_columns_per_task(tmp_path):
    cola = write(tmp_path / "cola.tsv", "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n")
    assert read_glue_tsv(cola, TASKS["CoLA"]) == ([("The sailors rode the breeze clear of the rocks.", None, "1")], 0)
    mrpc = write(tmp_path / "mrpc.tsv",
                 "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t7\t8\tHe said \"yes.\tHe agreed\n")
    assert read_glue_tsv(mrpc, TASKS["MRPC"]) == ([('He said "yes.', "He agreed", "1")], 0)
    head = "\t".join(f"c{i}" for i in range(12))
    mnli_dev = write(tmp_path / "mnli.tsv", head + "\t4\t5\t6\tgold_label\n" +
                     "\t".join(["x"] * 8 + ["premise", "hypothesis"] + ["x"] * 5 + ["neutral"]) + "\n")
    assert read_glue_tsv(mnli_dev, TASKS["MNLI"]) == ([("premise", "hypothesis", "neutral")], 0)


def test_tsv_row_with_missing_columns_names_file_and_line(tmp_path):
    rte = write(tmp_path / "train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tonly one\n")
    with pytest.raises(GlueFormatError, match=r"train\.tsv:3: 2 tab-separated columns, RTE needs at least 4"):
        read_glue_tsv(rte, TASKS["RTE"])
    bad_label = write(tmp_path / "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(GlueFormatError, match=r"dev\.tsv:2: RTE label 'maybe' is not one of"):
        read_glue_tsv(bad_label, TASKS["RTE"])
    for score in ("high", "nan", "-inf"):  # float() takes the last two: the loss was NaN at the first update
        bad_score = write(tmp_path / "sts.tsv", "h\n" + "\t".join(["x"] * 9 + [score]) + "\n")
        with pytest.raises(GlueFormatError, match=rf"sts\.tsv:2: STS-B score '{score}' is not a number"):
            read_glue_tsv(bad_score, TASKS["STS-B"])


def test_qqp_rows_with_missing_columns_are_skipped_and_counted(tmp_path):
    qqp = write(tmp_path / "train.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                "1\t1\t2\tq one?\tq two?\t0\n2\t3\t4\tbroken row\n3\t5\t6\tq?\tr?\t1\n4\t7\n")
    rows, skipped = read_glue_tsv(qqp, TASKS["QQP"])
    assert rows == [("q one?", "q two?", "0"), ("q?", "r?", "1")] and skipped == 2


def test_prepare_script_reports_the_bad_row_in_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch):
    (tmp_path / "RTE").mkdir()
    write(tmp_path / "RTE" / "train.tsv", "index\tsentence1\tsentence2\tlabel\n0\tno label here\n")
    write(tmp_path / "spm.model", "")
    write(tmp_path / "dict.txt", "a 1\n")
    monkeypatch.setattr(glue.spm, "SentencePieceProcessor", lambda **kw: None)  # the model is never used
    before = sorted(os.listdir(tmp_path))
    proc = run_main(glue.main, "--task", "RTE", "--glue-dir", tmp_path / "RTE", "--spm-model", tmp_path / "spm.model",
                    "--srcdict", tmp_path / "dict.txt", "--destdir", tmp_path / "out")
    assert proc.returncode == 2 and proc.stderr == (f"prepare_glue.py: error: {tmp_path / 'RTE' / 'train.tsv'}:2: "
                                                    "2 tab-separated columns, RTE needs at least 4\n")
    assert sorted(os.listdir(tmp_path)) == before  # no out, no out.tmp, no staging directory


def test_ctrl_c_while_the_tokenizer_loads_is_one_line_exit_130_and_writes_nothing(tmp_path, monkeypatch):
    """Loading the tokenizer imports its library (seconds): Ctrl-C there was a KeyboardInterrupt traceback."""
    (tmp_path / "RTE").mkdir()
    write(tmp_path / "spm.model", "")
    write(tmp_path / "dict.txt", "a 1\n")

    def interrupted(**kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(glue.spm, "SentencePieceProcessor", interrupted)
    before = sorted(os.listdir(tmp_path))
    proc = run_main(glue.main, "--task", "RTE", "--glue-dir", tmp_path / "RTE", "--spm-model", tmp_path / "spm.model",
                    "--srcdict", tmp_path / "dict.txt", "--destdir", tmp_path / "out")
    # (the line's "nothing written" is of this process: a command run in it before may be named)
    assert proc.returncode == 130 and proc.stderr.startswith("prepare_glue.py: interrupted: "), proc
    assert proc.stderr.count("\n") == 1 and sorted(os.listdir(tmp_path)) == before


def test_destdir_is_replaced_only_with_force_and_never_a_directory_that_holds_an_input(tmp_path_factory, tmp_path,
                                                                                       monkeypatch):
    """It replaced DESTDIR whatever it held (rmtree, then a rename: --destdir . emptied the current
    directory), and an error left DESTDIR.tmp behind."""
    pre = tokenizer(tmp_path_factory)
    glue_dir = tmp_path / "glue" / "RTE"
    glue_dir.mkdir(parents=True)
    for split in ("train", "dev"):
        write(glue_dir / f"{split}.tsv", "index\tsentence1\tsentence2\tlabel\n0\tka lo\tmi\tentailment\n")
    args = ["--task", "RTE", "--glue-dir", glue_dir, "--spm-model", pre["spm"], "--srcdict", pre["dict"]]
    out = tmp_path / "bin"
    assert run_main(glue.main, *args, "--destdir", out).returncode == 0
    (out / "mine.txt").write_text("keep me")
    refused = run_main(glue.main, *args, "--destdir", out)
    assert refused.returncode == 2 and refused.stderr.startswith("prepare_glue.py: error: ") and "--force" in \
        refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert (out / "mine.txt").read_text() == "keep me"
    assert run_main(glue.main, *args, "--destdir", out, "--force").returncode == 0
    assert not (out / "mine.txt").exists() and (out / "meta.json").is_file()
    for destdir in (tmp_path / "glue", tmp_path):  # holds the GLUE folder; is the current directory
        monkeypatch.chdir(tmp_path)
        proc = run_main(glue.main, *args, "--destdir", destdir, "--force")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["bin", "glue"] and sorted(os.listdir(glue_dir)) == ["dev.tsv", "train.tsv"]


def test_the_command_line_names_itself_in_its_errors_and_exits_2_on_a_bad_command_line(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "glue", "prepare_glue.py"), "--task", "RTE",
                           "--glue-dir", str(tmp_path), "--destdir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.splitlines()[-1] == ("prepare_glue.py: error: give --pretrain-data DIR, or --spm-model and "
                                            "--srcdict")


# ---------------------------------------------------------------- the recipe, end to end

@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    return glue_recipe(tmp_path_factory)  # shared with the recipes' smoke test (tests/nlu.py)


def metric(lines, name):
    last = lines[-1]
    return float(last.split(f"{name} ")[1].split(",")[0])


def test_recipe_fine_tunes_a_pretrained_checkpoint_to_tell_which_segment_has_the_marker(recipe):
    """Learnt on the CPU, which the recipe chose itself (device_flags: --cpu here, --fp16 on a GPU)."""
    lines = recipe["RTE"].result()["lines"]
    assert metric(lines, "accuracy") >= 95, lines
    cfg = torch.load(recipe["RTE"].result()["save"] / "checkpoint_best.pt", weights_only=True, mmap=True)["cfg"]
    assert cfg["common"]["cpu"] and not cfg["common"]["fp16"]


def test_the_fine_tuned_classifier_predicts_through_the_hub_as_roberta_s_does(recipe):
    """RoBERTa's way after GLUE fine-tuning: from_pretrained(save dir, checkpoint_file, data_name_or_path),
    encode(a, b), predict('sentence_classification_head', ...), the label from task.label_dictionary.
    On the dev TSV's pairs, one at a time and in one padded batch, it reaches the accuracy the recipe
    printed for its best checkpoint, and the batch gives each pair's own answer."""
    from fairseq.data.data_utils import collate_tokens

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    run = recipe["RTE"].result()
    hub = UniLMv2Model.from_pretrained(str(run["save"]), checkpoint_file="checkpoint_best.pt",
                                       data_name_or_path=str(run["data"]))
    labels = hub.task.label_dictionary
    rows = [line.split("\t") for line in (run["tsv"] / "dev.tsv").read_text().splitlines()[1:]]
    tokens = [hub.encode(a, b) for _, a, b, _ in rows]
    with torch.no_grad():
        one = torch.stack([hub.predict("sentence_classification_head", t)[0] for t in tokens])
        batch = hub.predict("sentence_classification_head", collate_tokens(tokens, pad_idx=hub.src_dict.pad()))
    assert (batch - one).abs().max().item() <= 1e-5
    said = [labels.string([int(i) + labels.nspecial]) for i in one.argmax(-1)]
    accuracy = 100 * sum(s == label for s, (*_, label) in zip(said, rows)) / len(rows)
    assert accuracy == pytest.approx(metric(run["lines"], "accuracy"), abs=0.01), (accuracy, run["lines"])


@pytest.mark.parametrize("task,score", [("RTE", "accuracy"), ("STS-B", "pearson")])
def test_predict_glue_writes_each_rows_prediction_and_scores_as_the_recipe_did(recipe, tmp_path, task, score):
    """scripts/glue/predict_glue.py: the loops above as a command, a line a dev row, in batches, and
    fine-tuning's own dev score for the same checkpoint (so a paired comparison reads the rows
    fairseq scored)."""
    run = recipe[task].result()
    out = tmp_path / "preds.tsv"
    proc = run_script("scripts/glue/predict_glue.py", "--checkpoint", run["save"] / "checkpoint_best.pt",
                      "--data", run["data"], "--glue-dir", run["tsv"], "--task", task, "--out", out,
                      "--batch-size", "7", *(["--cpu"] if task == "STS-B" else []))  # (the same here)
    assert proc.returncode == 0, proc.stderr
    rows = read_glue_tsv(str(run["tsv"] / "dev.tsv"), TASKS[task])[0]
    said = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert [label for *_, label in said] == [label for *_, label in rows]
    printed = proc.stdout.strip()
    assert printed.startswith(f"predict_glue: {task} {run['tsv'] / 'dev.tsv'}: {score} "), printed
    if task == "RTE":
        right = sum(p == label for _, p, label in said)
        assert printed.endswith(f"accuracy {100 * right / len(rows):.2f} ({right} of {len(rows)})"), printed
    value = float(printed.split(f"{score} ")[1].split()[0])
    # fairseq logs it rounded to 0.1
    assert value == pytest.approx(metric(run["lines"], score), abs=0.05), (printed, run["lines"])


def test_predict_glue_without_its_tsv_or_checkpoint_is_one_line_naming_it(tmp_path):
    def predict(*args):
        proc = run_script("scripts/glue/predict_glue.py", "--checkpoint", tmp_path / "nope.pt", "--data", tmp_path,
                          "--glue-dir", tmp_path, "--task", "RTE", *args)
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        return proc.stderr.strip().splitlines()[-1]

    assert predict() == (f"predict_glue.py: error: {tmp_path}/dev.tsv: not found (--glue-dir and --split name "
                         "the labelled TSV)")
    (tmp_path / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    assert predict() == (f"predict_glue.py: error: {tmp_path}/nope.pt: not found (--checkpoint: a finetune_glue.sh "
                         "checkpoint; --data: its prepare_glue.py output)")


def test_the_fine_tuned_regression_predicts_its_score_through_the_hub(recipe):
    """STS-B's one-output head through the hub: predict gives the score (not the log-softmax of one
    number, 0 for every input), whose Pearson correlation with the dev scores is the one the recipe
    printed for its best checkpoint."""
    from scipy.stats import pearsonr

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    run = recipe["STS-B"].result()
    hub = UniLMv2Model.from_pretrained(str(run["save"]), checkpoint_file="checkpoint_best.pt",
                                       data_name_or_path=str(run["data"]))
    rows = [line.split("\t") for line in (run["tsv"] / "dev.tsv").read_text().splitlines()[1:]]
    with torch.no_grad():
        scores = [hub.predict("sentence_classification_head", hub.encode(row[7], row[8])).item() for row in rows]
    assert len(set(scores)) > 1
    pearson = 100 * pearsonr(scores, [float(row[9]) for row in rows])[0]
    # fairseq logs it rounded to 0.1 (printed "97.30")
    assert pearson == pytest.approx(metric(run["lines"], "pearson"), abs=0.05), (pearson, run["lines"])


def test_recipe_regression_correlates_with_the_score(recipe):
    lines = recipe["STS-B"].result()["lines"]
    assert metric(lines, "pearson") >= 85 and metric(lines, "spearman") >= 85, lines


def test_mnli_matched_and_mismatched_dev_sets_become_valid_and_valid1(tmp_path_factory, tmp_path):
    from fairseq.data import data_utils

    pre = tokenizer(tmp_path_factory)
    head = "\t".join(f"c{i}" for i in range(8)) + "\tsentence1\tsentence2\tlabel1\tgold_label"
    for split, n in (("train", 3), ("dev_matched", 2), ("dev_mismatched", 1)):
        rows = ["\t".join(["x"] * 8 + [f"ka lo {split}", "mi", "neutral", "entailment"]) for _ in range(n)]
        write(tmp_path / f"{split}.tsv", head + "\n" + "\n".join(rows) + "\n")
    prepare_glue("--task", "MNLI", "--glue-dir", tmp_path, "--spm-model", pre["spm"], "--srcdict", pre["dict"],
            "--destdir", tmp_path / "bin")
    d = Dictionary.load(str(tmp_path / "bin" / "input0" / "dict.txt"))
    sizes = {s: len(data_utils.load_indexed_dataset(str(tmp_path / "bin" / "input0" / s), d))
             for s in ("train", "valid", "valid1")}
    assert sizes == {"train": 3, "valid": 2, "valid1": 1}
    labels = Dictionary.load(str(tmp_path / "bin" / "label" / "dict.txt"))
    assert labels.symbols[labels.nspecial:] == list(TASKS["MNLI"].labels)  # class i = labels[i] everywhere


@pytest.mark.parametrize("separator", [None, 2], ids=["recipe", "roberta-readme-separator-token-2"])
def test_the_hub_encodes_a_pair_as_fine_tuning_fed_it(recipe, separator, tmp_path):
    """fairseq's sentence_prediction builds [SOS] A [EOS] B [EOS] (the recipe's --init-token 0), or with
    RoBERTa's README flag --separator-token 2 [SOS] A [EOS] [EOS] B [EOS]: the hub's encode(a, b)
    gives the tokens the checkpoint was fine-tuned on, read from its recorded task options (it gave
    the single [EOS] to a model trained with two: inputs it never saw)."""
    import shutil

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    run = recipe["RTE"].result()
    state = torch.load(run["save"] / "checkpoint_best.pt", weights_only=False)
    state["cfg"]["task"]["separator_token"] = separator
    shutil.copytree(run["data"], tmp_path / "data")
    torch.save(state, tmp_path / "model.pt")
    hub = UniLMv2Model.from_pretrained(str(tmp_path), checkpoint_file="model.pt",
                                       data_name_or_path=str(tmp_path / "data"))
    hub.task.load_dataset("valid")
    fed = hub.task.dataset("valid")[0]["net_input.src_tokens"]
    _, a, b, _ = (run["tsv"] / "dev.tsv").read_text().splitlines()[1].split("\t")
    assert hub.encode(a, b).tolist() == fed.tolist()
    assert fed.tolist().count(hub.src_dict.eos()) == (3 if separator else 2)
    # and decode gives the two texts back, as RoBERTa's (the separator made an empty middle one)
    assert hub.decode(fed) == [hub.decode(hub.encode(a)), hub.decode(hub.encode(b))]


def marker_rte_recipe(tmp_path_factory, tmp_path, sizes, flags=(), fairseq_flags=(), check=True):
    """finetune_glue.sh FLAGS -- FAIRSEQ_FLAGS on a marker RTE of ``sizes`` (train, dev) examples,
    from the suite's tiny pre-trained checkpoint, on the CPU."""
    import random

    from cli import recipe as run_recipe
    from nlu import marker_rte, pretrained

    pre = pretrained(tmp_path_factory)
    marker_rte(tmp_path / "RTE", random.Random(3), sizes=(("train", sizes[0]), ("dev", sizes[1])))
    prepare_glue("--task", "RTE", "--glue-dir", tmp_path / "RTE", "--spm-model", pre["spm"], "--srcdict", pre["dict"],
                 "--destdir", tmp_path / "bin")
    return run_recipe("glue/finetune_glue.sh", "--data", tmp_path / "bin", "--checkpoint", pre["checkpoint"],
                      "--save-dir", tmp_path / "save", "--arch", "unilmv2_tiny", *flags, "--",
                      "--num-workers", "0", "--max-positions", "64", *fairseq_flags, check=check)


def test_a_best_checkpoint_metric_after_the_double_dash_is_what_checkpoint_best_and_the_report_follow(
        tmp_path_factory, tmp_path):
    """-- --best-checkpoint-metric loss: the recipe still passed --maximize-best-checkpoint-metric (so
    checkpoint_best.pt kept the epoch of the highest dev loss) and reported the epoch of the best
    accuracy, which no checkpoint held."""
    import json

    from cli import records

    proc = marker_rte_recipe(tmp_path_factory, tmp_path, (200, 40), ("--lr", "1e-3", "--batch-size", "16",
                             "--epochs", "4"), ("--best-checkpoint-metric", "loss"))
    valid = records(proc, "valid")
    losses = {int(r["epoch"]): float(r["valid_loss"]) for r in valid}
    lowest = max(losses, key=lambda e: (-losses[e], e))  # fairseq replaces the best on a tie
    best = torch.load(tmp_path / "save" / "checkpoint_best.pt", map_location="cpu", weights_only=True)
    updates = {int(r["valid_num_updates"]): int(r["epoch"]) for r in valid}
    assert updates[best["optimizer_history"][-1]["num_updates"]] == lowest, (losses, proc.stdout[-2000:])
    report = [line for line in proc.stdout.splitlines() if line.startswith("finetune_glue: RTE valid ")]
    assert report == [report[0]] and report[0].startswith(f"finetune_glue: RTE valid (best epoch {lowest}): accuracy ")
    assert report[0].endswith(f", loss {losses[lowest]:.2f}"), (report, json.dumps(losses))


def test_fairseqs_bf16_tpu_mode_on_the_stock_sentence_prediction_task_is_one_line(tmp_path_factory, tmp_path):
    """--bf16 means TPU to fairseq: without torch_xla its Trainer stopped with "'NoneType' object has
    no attribute 'xla_device'" (a traceback), for fairseq's own tasks as for the plugin's."""
    proc = marker_rte_recipe(tmp_path_factory, tmp_path, (20, 4), fairseq_flags=("--bf16",), check=False)
    out = proc.stdout + proc.stderr  # (the recipe copies fairseq-train's two streams to its stdout and train.log)
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert out.strip().splitlines()[-1] == (
        "fairseq-train: error: --bf16 (and --memory-efficient-bf16) is fairseq's TPU mode and this machine has no "
        "TPU (torch_xla): for bf16 on a GPU or CPU use --bf16-autocast"), out[-3000:]
    assert not [f for f in os.listdir(tmp_path / "save") if f.endswith(".pt")]
