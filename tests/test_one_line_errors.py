"""Bad input that used to end in a traceback through fairseq now stops with one line naming the
file or flag and exit status 2 (fairseq_pmlm/errors.py, whose exception hook prints it):
sharded data that is not one dictionary's or not whole, a fine-tuned checkpoint given to
pre-training's --restore-file, --tokens-per-sample beyond the positions, a truncated
sequence-to-sequence .bin, decoding with a checkpoint of another dictionary, a fine-tuning
recipe whose checkpoint_last.pt is unreadable (named with the intact checkpoint beside it), a
full disk while fine-tuning saves or decoding writes its results (/dev/full).

The fairseq-train cases run in forked children of one process (tests/kill_driver.py: a fork
prints an uncaught exception through sys.excepthook, as the console script does); the three
independent jobs run at once in cli.py's two-worker pool."""
import os
import re
import shutil

import pytest
import torch

from fairseq_pmlm.data.databin.cli import main as text_to_databin

from cli import USER_DIR, drive, recipe, run, submit, train_args
from helpers import stdlib_docstrings
from tiny_s2s import tiny_s2s


def driven(root, cases, faults=None):
    """{name: (exit statuses, log)} of fairseq-train runs, one per case (name -> argv; ``faults``:
    name -> a fault of tests/kill_driver.py)."""
    plans = [{"argv": [str(a) for a in argv], "log": str(root / f"{name}.log"), "save_dir": str(root / name),
              "fault": (faults or {}).get(name)} for name, argv in cases.items()]
    results = drive(plans, root / "plans.json")
    return {name: (r["status"], open(p["log"]).read()) for name, r, p in zip(cases, results, plans)}


def shards_of(root):
    """Two corpora of two shards each, their sentencepiece dictionaries of different sizes."""
    _, sentences = stdlib_docstrings(["json/__init__", "argparse", "textwrap", "csv"])
    (root / "train.txt").write_text("\n".join(sentences) + "\n")
    (root / "valid.txt").write_text("\n".join(sentences[:40]) + "\n")
    for name, vocab in (("data", "400"), ("other", "300")):
        assert text_to_databin(["--out", str(root / name), "corpus", "--train", str(root / "train.txt"),
                                     "--valid", str(root / "valid.txt"), "--vocab-size", vocab, "--shards", "2"]) == 0
    return [root / "data" / "shard0", root / "data" / "shard1"], root / "other" / "shard1"


def shorten(path, n):
    """``path`` without its last ``n`` bytes (truncate -s -N)."""
    os.truncate(path, os.path.getsize(path) - n)


def broken_copy(root, shard, name, change):
    copy = root / name
    shutil.copytree(shard, copy)
    change(copy)
    return copy


def training_cases(root, tiny_data, tiny_save):
    """(the good shards, the bad shard of each case, {case: fairseq-train arguments}); the data is
    made here, in the main thread (text_to_databin installs signal handlers)."""
    shards, other = shards_of(root)
    s1 = shards[1]

    def cut(d):
        with open(d / "train.bin", "r+b") as f:
            f.truncate(os.path.getsize(d / "train.bin") - 10)

    bad = {
        "other_dict": other,
        "no_dict": broken_copy(root, s1, "no_dict", lambda d: os.remove(d / "dict.txt")),
        "missing": root / "nowhere",
        "empty_dir": broken_copy(root, s1, "empty_dir", lambda d: [os.remove(d / f) for f in os.listdir(d)]),
        "zero_bytes": broken_copy(root, s1, "zero_bytes", lambda d: open(d / "train.bin", "wb").close()),
        "cut_short": broken_copy(root, s1, "cut_short", cut),
        "idx_cut": broken_copy(root, s1, "idx_cut", lambda d: shorten(d / "train.idx", 100)),
    }
    cases = {name: train_args(f"{shards[0]}:{shard}", root / name, "--max-update", "100")
             for name, shard in bad.items()}
    cases["positions"] = train_args(shards[0], root / "positions", "--max-update", "2", "--tokens-per-sample", "1024")
    # pre-training data with the dictionary of the tiny fine-tuned checkpoint, which --restore-file is given
    assert text_to_databin(["--out", str(root / "pre"), "corpus", "--train", str(root / "valid.txt"),
                                 "--valid", str(root / "valid.txt"), "--spm-model", str(tiny_data / "spm.model"),
                                 "--srcdict", str(tiny_data / "dict.txt")]) == 0
    cases["restore_finetuned"] = train_args(root / "pre", root / "restore_finetuned", "--max-update", "2",
                                            "--restore-file", tiny_save / "checkpoint_last.pt")
    s2s = broken_copy(root, tiny_data, "s2s_cut", lambda d: None)
    with open(s2s / "train.source-target.source.bin", "r+b") as f:
        f.truncate(os.path.getsize(s2s / "train.source-target.source.bin") - 4)
    s2s_idx = broken_copy(root, tiny_data, "s2s_idx_cut", lambda d: None)
    shorten(s2s_idx / "train.source-target.target.idx", 100)
    for name, data in (("s2s_cut_short", s2s), ("s2s_full_disk", tiny_data), ("s2s_idx_cut", s2s_idx)):
        cases[name] = [data, "--user-dir", USER_DIR, "--task", "pmlm_seq2seq", "--criterion", "pmlm_seq2seq",
                       "--arch", "unilmv2_tiny", "--optimizer", "adam", "--lr", "1e-4", "--batch-size", "8",
                       "--max-update", "2", "--max-source-positions", "48", "--max-target-positions", "32",
                       "--num-workers", "0", "--cpu", "--save-dir", root / name]
    return shards, bad, cases


def generate_with_another_dictionary(root, tiny_raw, tiny_data, tiny_save):
    other = root / "data"
    shutil.copytree(tiny_data, other)
    with open(other / "dict.txt", "a") as f:
        f.write("".join(f"extra{i} 1\n" for i in range(8)))
    return recipe("s2s/generate.sh", "--preset", "demo", "--data", other, "--checkpoint",
                  tiny_save / "checkpoint_last.pt", "--refs", tiny_raw / "test.target", "--out-dir", root / "gen",
                  "--", "--cpu", "--max-len-b", "4", check=False)


def generate_with_a_cut_idx(root, tiny_raw, tiny_data, tiny_save):
    data = root / "data"
    shutil.copytree(tiny_data, data)
    shorten(data / "test.source-target.source.idx", 10)
    return recipe("s2s/generate.sh", "--preset", "demo", "--data", data, "--checkpoint",
                  tiny_save / "checkpoint_last.pt", "--refs", tiny_raw / "test.target", "--out-dir", root / "gen",
                  "--", "--cpu", "--max-len-b", "4", check=False)


def generate_onto_a_full_disk(root, tiny_data, tiny_save):
    """fairseq-generate whose results file is /dev/full (every write fails with ENOSPC)."""
    root.mkdir()
    os.symlink("/dev/full", root / "generate-test.txt")
    return run("fairseq-generate", tiny_data, "--user-dir", USER_DIR, "--task", "pmlm_seq2seq", "--path",
               tiny_save / "checkpoint_last.pt", "--gen-subset", "test", "--max-len-b", "4", "--beam", "2",
               "--cpu", "--results-path", root, check=False)


def finetune_after_a_cut_checkpoint_last(root, tiny_data, tiny_save):
    save = root / "save"
    shutil.copytree(tiny_save, save)
    shutil.copy(save / "checkpoint_last.pt", save / "checkpoint_best.pt")
    with open(save / "checkpoint_last.pt", "r+b") as f:
        f.truncate(3000)
    return save, recipe("s2s/finetune.sh", "--preset", "demo", "--data", tiny_data, "--checkpoint", "none",
                        "--save-dir", save, "--", "--arch", "unilmv2_tiny", "--max-update", "4", check=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    raw, data, save = tiny_s2s(tmp_path_factory)
    root = tmp_path_factory.mktemp("one_line")
    for d in ("train", "gen", "ft"):
        (root / d).mkdir()
    shards, bad, cases = training_cases(root / "train", data, save)
    full_disk = {"s2s_full_disk": {"errno": "ENOSPC", "at": "write", "n": 1}}  # the first checkpoint file's fsync
    train = submit(lambda: (shards, bad, driven(root / "train", cases, full_disk)))
    return {"root": root, "save": save, "train": train,
            "generate": submit(generate_with_another_dictionary, root / "gen", raw, data, save),
            "generate_full": submit(generate_onto_a_full_disk, root / "gen_full", data, save),
            "generate_idx": submit(generate_with_a_cut_idx, root / "gen_idx", raw, data, save),
            "finetune": submit(finetune_after_a_cut_checkpoint_last, root / "ft", data, save)}


def one_error_line(status, log):
    """The run failed, printed no traceback and exactly one error line: that line."""
    assert status == [2] and "Traceback" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith("fairseq-train: error: "), log[-3000:]
    return errors[0][len("fairseq-train: error: "):]


@pytest.mark.parametrize("case,expect", [
    ("other_dict", "{shard}/dict.txt differs from {first}/dict.txt: every shard must be binarized with one dictionary"),
    ("no_dict", "shard 1 has no dict.txt: {shard}/dict.txt missing (every shard must be binarized with one dictionary; "
                "if this one was made with {first}/dict.txt, copy it there)"),
    ("missing", "shard 1 of 2 not found: {shard}"),
    ("empty_dir", "shard 1 has no dict.txt: {shard}/dict.txt missing"),
    ("zero_bytes", "{shard}/train.bin is cut short: 0 bytes where {shard}/train.idx needs "),
    ("idx_cut", "{shard}/train.idx is cut short: "),
    ("cut_short", "{shard}/train.bin is cut short: "),
])
def test_a_bad_shard_stops_training_with_one_line_naming_its_file(runs, case, expect):
    shards, bad, results = runs["train"].result()
    line = one_error_line(*results[case])
    assert line.startswith(expect.format(shard=bad[case], first=shards[0])), line
    if case != "cut_short":  # refused at start; a shard cut short is found when its epoch loads it
        assert not os.path.exists(runs["root"] / "train" / case / "checkpoint_last.pt")


def test_a_shard_without_dict_txt_is_refused_at_start_not_trained_on(runs):
    """A shard binarized with another dictionary and its dict.txt left behind trained silently
    on the wrong ids (or failed at its epoch with an IndexError naming no file)."""
    _, _, results = runs["train"].result()
    status, log = results["no_dict"]
    assert status == [2] and '"num_updates"' not in log and "train_inner" not in log


def test_tokens_per_sample_over_the_positions_is_one_line_naming_the_flag(runs):
    line = one_error_line(*runs["train"].result()[2]["positions"])
    assert line == "--tokens-per-sample 1024 exceeds the model's --max-positions 512"


def test_a_fine_tuned_checkpoint_given_to_restore_file_is_one_line_with_the_flag_that_fits(runs):
    _, _, results = runs["train"].result()
    ckpt = runs["save"] / "checkpoint_last.pt"
    assert one_error_line(*results["restore_finetuned"]) == (
        f"--restore-file {ckpt} is a checkpoint of another run (task pmlm_seq2seq, PMLMSeq2SeqCriterion; this one: "
        "task pseudo_masked_lm, PMLMCriterion): to start from its weights, give it as --finetune-from-model")


def test_a_truncated_seq2seq_idx_is_one_line_naming_it_in_fine_tuning(runs):
    """fairseq's reader: "buffer is smaller than requested size", then an AttributeError."""
    line = one_error_line(*runs["train"].result()[2]["s2s_idx_cut"])
    idx = runs["root"] / "train" / "s2s_idx_cut" / "train.source-target.target.idx"
    assert re.fullmatch(rf"{re.escape(str(idx))} is cut short: [0-9,]+ bytes where its header's [0-9,]+ items "
                        r"need [0-9,]+ \(an interrupted copy\? prepare or copy it again\)", line), line


def test_a_truncated_test_idx_is_one_line_naming_it_in_decoding(runs):
    proc = runs["generate_idx"].result()
    idx = runs["root"] / "gen_idx" / "data" / "test.source-target.source.idx"
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(errors) == 1 and errors[0].startswith(f"fairseq-generate: error: {idx} is cut short: "), errors


def test_a_truncated_seq2seq_bin_is_one_line_naming_it(runs):
    line = one_error_line(*runs["train"].result()[2]["s2s_cut_short"])
    prefix = runs["root"] / "train" / "s2s_cut" / "train.source-target.source"
    assert line.startswith(f"{prefix}.bin is cut short: "), line


def test_decoding_with_a_checkpoint_of_another_dictionary_is_one_line(runs):
    proc = runs["generate"].result()
    ckpt, other = runs["save"] / "checkpoint_last.pt", runs["root"] / "gen" / "data"
    rows = torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)["model"][
        "transformer.embed_tokens.weight"].size(0)
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and errors == [
        f"fairseq-generate: error: {ckpt} was trained with a different dictionary than {other}/dict.txt + [MASK] + "
        f"[P] ({rows} rows against {rows + 8}): binarize the data with the checkpoint's dictionary "
        "(fairseq-preprocess --srcdict)"], proc.stderr[-3000:]
    assert not os.path.exists(runs["root"] / "gen" / "gen" / "hyp.txt")


def test_a_full_disk_while_fine_tuning_saves_a_checkpoint_is_one_line_naming_it(runs):
    """A 20-120-line traceback before; the write stays atomic: no checkpoint file, no .tmp, and the
    save dir the run made, left empty, is removed."""
    save = runs["root"] / "train" / "s2s_full_disk"
    line = one_error_line(*runs["train"].result()[2]["s2s_full_disk"])
    assert re.fullmatch(rf"{re.escape(str(save))}/checkpoint\w*\.pt: cannot write it: No space left on device",
                        line), line
    assert not save.exists()


def test_a_full_disk_while_decoding_is_one_line_naming_the_results_file(runs):
    proc = runs["generate_full"].result()
    results = runs["root"] / "gen_full" / "generate-test.txt"
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert [line for line in proc.stderr.splitlines() if "error" in line.lower()] == [
        f"fairseq-generate: error: {results}: cannot write it: No space left on device"], proc.stderr[-3000:]


def test_a_failed_decoding_leaves_no_empty_out_dir(runs):
    proc = runs["generate"].result()
    assert proc.returncode != 0 and not os.path.exists(runs["root"] / "gen" / "gen"), proc.stderr[-3000:]


def test_fine_tuning_with_an_unreadable_checkpoint_last_names_the_intact_one_beside_it(runs):
    save, proc = runs["finetune"].result()
    assert proc.returncode == 2 and proc.stderr == (
        f"s2s/finetune.sh: error: checkpoint {save}/checkpoint_last.pt is unreadable (truncated: 3,000 bytes without "
        f"the zip directory that ends a whole file); the newest intact checkpoint there is {save}/checkpoint_best.pt "
        f"(update 2): `cp {save}/checkpoint_best.pt {save}/checkpoint_last.pt` and rerun the same command to resume "
        "from it (--force moves it aside)\n")


@pytest.mark.parametrize("case", ["missing", "a directory"])
def test_decoding_from_a_checkpoint_path_that_is_missing_or_a_directory_is_one_line_naming_it(case, tmp_path_factory):
    """fairseq's IOError "Model file not found" and IsADirectoryError (a save dir as --path) were tracebacks."""
    _, data, save = tiny_s2s(tmp_path_factory)
    path = save / "checkpoint_nope.pt" if case == "missing" else save
    proc = run("fairseq-generate", data, "--user-dir", USER_DIR, "--task", "pmlm_seq2seq", "--path", path,
               "--gen-subset", "test", "--cpu", check=False)
    expect = (f"checkpoint not found: {path}" if case == "missing" else
              f"checkpoint {path} is a directory: name a checkpoint file (the newest intact one in it: "
              f"{save}/checkpoint_last.pt)")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert [line for line in proc.stderr.splitlines() if "error" in line.lower()] == [
        f"fairseq-generate: error: {expect}"], proc.stderr[-3000:]
