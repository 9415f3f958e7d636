"""Sentence pairs binarized as a translation user runs fairseq-preprocess (``--source-lang src
--target-lang tgt --joined-dictionary``: train.src-tgt.src.bin, dict.src.txt, no dict.txt) go
through the seq2seq recipes when the suffixes are named after ``--`` (fairseq reads them there
too), and the hub loads the model from its save dir (the dictionary found by the recorded
--source-lang: data/dict_files.py). Unnamed, the recipe says in one line which file it looked for."""
import os
import shutil

from tiny_s2s import TEST_PAIRS, finetune, recipe, tiny_s2s

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
