"""Sentence pairs binarized as a translation user runs fairseq-preprocess (``--source-lang src
--target-lang tgt --joined-dictionary``: train.src-tgt.src.bin, dict.src.txt, no dict.txt) go
through the seq2seq recipes when the suffixes are named after ``--`` (fairseq reads them there
too), and the hub loads the model from its save dir (the dictionary found by the recorded
--source-lang: data/dict_files.py). Unnamed, the recipe says in one line which file it looked for,
and fairseq's own commands which flags read the pairs."""
import os
import shutil

import pytest

from cli import USER_DIR, recipe, run
from tiny_s2s import TEST_PAIRS, finetune, tiny_s2s

LANGS = ["--source-lang", "src", "--target-lang", "tgt"]


def renamed(data, to):
    """``data`` (prepare's source/target layout) with the suffixes src/tgt and no dict.txt."""
    to.mkdir()
    for name in os.listdir(data):
        new = name.replace("source-target", "src-tgt").replace(".source.", ".src.").replace(".target.", ".tgt.")
        new = new.replace("dict.source.", "dict.src.").replace("dict.target.", "dict.tgt.")
        if name != "dict.txt":
            shutil.copy(data / name, to / new)
    return to


def test_pairs_with_src_tgt_suffixes_fine_tune_decode_and_load_in_the_hub(tmp_path_factory, tmp_path):
    raw, data, _ = tiny_s2s(tmp_path_factory)
    data = renamed(data, tmp_path / "data")
    assert not (data / "dict.txt").exists() and (data / "dict.src.txt").exists()
    save = tmp_path / "save"

    unnamed = finetune(data, save, check=False)
    assert unnamed.returncode == 2 and unnamed.stderr.strip().splitlines() == [
        f"s2s/finetune.sh: error: no binarized train split in {data}: no train.source-target.source.idx (run "
        "scripts/s2s/prepare.sh; data of fairseq-preprocess with other language suffixes: name them after --, "
        "--source-lang SRC --target-lang TGT)"]

    recipe("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", "none", "--save-dir", save, "--",
           *LANGS, "--arch", "unilmv2_tiny", "--max-update", "2", "--batch-size", "8", "--disable-validation",
           "--num-workers", "0")
    out = tmp_path / "gen"
    recipe("s2s/generate.sh", "--preset", "demo", "--data", data, "--checkpoint", save / "checkpoint_last.pt",
           "--refs", raw / "test.target", "--out-dir", out, "--", *LANGS, "--cpu")
    assert len((out / "hyp.txt").read_text().splitlines()) == TEST_PAIRS

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    hub = UniLMv2Model.from_pretrained(str(save))
    assert len(hub.sample(["the cat sat on the mat", "a dog ran"], beam=2, max_len_b=4)) == 2


def test_pairs_binarized_with_other_suffixes_are_named_with_the_flags_that_read_them(tmp_path_factory, tmp_path):
    """fairseq-preprocess as translation users run it (--source-lang src --target-lang tgt) and the
    task's defaults (source, target): "dictionary not found: DIR/dict.txt" beside a dict.src.txt
    before. A directory that has the dictionary is read as before: fairseq-interactive needs no pairs."""
    from fairseq_pmlm.errors import BadInput
    from fairseq_pmlm.tasks.pmlm_seq2seq import PMLMSeq2SeqConfig, PMLMSeq2SeqTask

    _, data, _ = tiny_s2s(tmp_path_factory)
    data = renamed(data, tmp_path / "data")
    with pytest.raises(BadInput) as e:
        PMLMSeq2SeqTask.setup_task(PMLMSeq2SeqConfig(data=str(data), seed=1))
    assert str(e.value) == (f"{data} has no source-target pairs (--source-lang source --target-lang target): "
                            "its pairs are read with --source-lang src --target-lang tgt")
    task = PMLMSeq2SeqTask.setup_task(PMLMSeq2SeqConfig(data=str(data), seed=1, source_lang="src",
                                                        target_lang="tgt"))
    task.load_dataset("test")
    assert len(task.dataset("test")) == TEST_PAIRS
    os.symlink(data / "dict.src.txt", data / "dict.txt")
    task = PMLMSeq2SeqTask.setup_task(PMLMSeq2SeqConfig(data=str(data), seed=1))  # the dictionary is there
    with pytest.raises(BadInput, match=r"its pairs are read with --source-lang src --target-lang tgt$"):
        task.load_dataset("test")


def test_fairseq_train_stopped_by_the_hint_leaves_no_save_dir(tmp_path_factory, tmp_path):
    """fairseq-train makes --save-dir before it sets the task up: a run stopped by bad input left
    it behind, empty. A save dir that already existed stays."""
    _, data, _ = tiny_s2s(tmp_path_factory)
    data = renamed(data, tmp_path / "data")
    args = [data, "--user-dir", USER_DIR, "--task", "pmlm_seq2seq", "--arch", "unilmv2_tiny", "--criterion",
            "pmlm_seq2seq", "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "4", "--max-update", "1", "--cpu"]
    proc = run("fairseq-train", *args, "--save-dir", tmp_path / "save", check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "its pairs are read with --source-lang src --target-lang tgt"), proc.stderr[-2000:]
    assert not (tmp_path / "save").exists()
    (tmp_path / "kept").mkdir()
    assert run("fairseq-train", *args, "--save-dir", tmp_path / "kept", check=False).returncode == 2
    assert (tmp_path / "kept").is_dir()
