"""Sharded pre-training data (prepare_data.sh --shards K, read one shard per epoch): bad shards
are refused when training starts, each with a line naming the file."""
import os
import shutil

import pytest

from fairseq_pmlm.data.databin.cli import main as text_to_databin
from fairseq_pmlm.tasks.pseudo_masked_lm import PseudoMaskedLMConfig, PseudoMaskedLMTask

from cli import recipe
from helpers import stdlib_docstrings


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shards")
    _, sentences = stdlib_docstrings(["json/__init__", "argparse", "textwrap", "csv", "string", "shlex"])
    (tmp / "train.txt").write_text("\n".join(sentences) + "\n")
    (tmp / "valid.txt").write_text("\n".join(sentences[:40]) + "\n")
    for name, vocab in (("data", "400"), ("other", "300")):
        assert text_to_databin(["--out", str(tmp / name), "corpus", "--train", str(tmp / "train.txt"),
                                     "--valid", str(tmp / "valid.txt"), "--vocab-size", vocab, "--shards", "2"]) == 0
    return tmp


def setup(paths, train_subset="train"):
    return PseudoMaskedLMTask.setup_task(
        PseudoMaskedLMConfig(data=":".join(map(str, paths)), seed=1, tokens_per_sample=64, train_subset=train_subset))


def copy_shards(sharded, tmp_path):
    shards = [tmp_path / f"shard{k}" for k in range(2)]
    for k, s in enumerate(shards):
        shutil.copytree(sharded / "data" / f"shard{k}", s)
    return shards


def test_epoch_k_reads_shard_k_minus_1_round_robin_and_valid_the_first(sharded):
    shards = [sharded / "data" / f"shard{k}" for k in range(2)]
    task = setup(shards)
    seen = []
    for epoch in (1, 2, 3):
        task.load_dataset("train", epoch=epoch)
        seen.append(task.datasets["train"].lines.sizes.tolist())
    assert seen[0] == seen[2] != seen[1]
    task.load_dataset("valid", epoch=1)
    assert len(task.datasets["valid"]) > 0


def test_shards_with_different_dictionaries_are_refused_at_start(sharded):
    with pytest.raises(ValueError, match="differs from .* every shard must be binarized with one dictionary"):
        setup([sharded / "data" / "shard0", sharded / "other" / "shard1"])


def test_a_shard_without_dict_txt_is_refused_at_start_naming_the_file(sharded, tmp_path):
    """Its ids may be another dictionary's: trained on silently, or an IndexError at its epoch."""
    shards = copy_shards(sharded, tmp_path)
    os.remove(shards[1] / "dict.txt")
    with pytest.raises(FileNotFoundError, match=f"shard 1 has no dict.txt: {shards[1] / 'dict.txt'} missing"):
        setup(shards)


def test_a_missing_shard_is_refused_at_start_naming_it(sharded, tmp_path):
    with pytest.raises(FileNotFoundError, match=f"shard 1 of 2 not found: {tmp_path / 'nope'}"):
        setup([sharded / "data" / "shard0", tmp_path / "nope"])


def test_an_empty_shard_path_is_refused_naming_the_colon_too_many(sharded):
    """--data DIR: (a trailing ':') was "shard 1 of 2 not found: " with nothing after it."""
    with pytest.raises(FileNotFoundError, match=f"^shard 1 of 2 is an empty path: a ':' too many in --data "
                                                f"{sharded / 'data' / 'shard0'}:$"):
        setup([sharded / "data" / "shard0", ""])


def test_a_zero_byte_bin_is_refused_at_start_as_cut_short_not_as_text_without_tokens(sharded, tmp_path):
    """Its .idx lists lines: a copy cut to nothing, not "the text had no tokens"."""
    shards = copy_shards(sharded, tmp_path)
    open(shards[1] / "train.bin", "wb").close()
    prefix = shards[1] / "train"
    with pytest.raises(ValueError, match=f"^{prefix}.bin is cut short: 0 bytes where {prefix}.idx needs [0-9,]+ "):
        setup(shards)
    os.remove(shards[1] / "train.idx")
    with pytest.raises(FileNotFoundError, match=f"shard 1 has no train split: {shards[1] / 'train'}.idx"):
        setup(shards)


def test_a_split_without_lines_is_refused_at_start_as_empty(sharded, tmp_path):
    from fairseq_pmlm.data.databin.writer import write_index

    shards = copy_shards(sharded, tmp_path)
    open(shards[1] / "train.bin", "wb").close()
    open(tmp_path / "none.sizes", "wb").close()
    write_index(str(shards[1] / "train.idx"), [str(tmp_path / "none.sizes")], "uint16")
    prefix = shards[1] / "train"
    with pytest.raises(ValueError, match=f"^dataset is empty: {prefix}.bin \\({prefix}.idx lists no lines"):
        setup(shards)


@pytest.mark.parametrize("cut", [100, 1000])  # within the offsets; into the header
def test_an_idx_cut_short_is_refused_at_start_naming_it_and_its_size(sharded, tmp_path, cut):
    """A chained traceback in fairseq's reader before ("buffer is smaller than requested size")."""
    shards = copy_shards(sharded, tmp_path)
    idx = shards[1] / "train.idx"
    size = os.path.getsize(idx)
    with open(idx, "r+b") as f:
        f.truncate(max(size - cut, 10))
    with pytest.raises(ValueError, match=f"^{idx} is cut short: [0-9,]+ bytes"):
        setup(shards)


def test_the_start_check_reads_the_train_subset_fairseq_trains_on(sharded, tmp_path):
    """--train-subset big: every shard's big split is checked, not a train split it need not have."""
    shards = copy_shards(sharded, tmp_path)
    for shard in shards:
        for ext in ("bin", "idx"):
            os.rename(shard / f"train.{ext}", shard / f"big.{ext}")
    setup(shards, train_subset="big")
    os.remove(shards[1] / "big.idx")
    with pytest.raises(FileNotFoundError, match=f"shard 1 has no big split: {shards[1] / 'big'}.idx"):
        setup(shards, train_subset="big")


def test_a_bin_cut_short_is_refused_when_loaded_naming_the_file(sharded, tmp_path):
    shards = copy_shards(sharded, tmp_path)
    with open(shards[1] / "train.bin", "r+b") as f:
        f.truncate(os.path.getsize(shards[1] / "train.bin") - 10)
    task = setup(shards)
    task.load_dataset("train", epoch=1)
    with pytest.raises(ValueError, match=f"{shards[1] / 'train'}.bin is cut short"):
        task.load_dataset("train", epoch=2)


def test_pretrain_sh_trains_on_shards_joined_by_colons_as_fairseq_train_reads_them(sharded, tmp_path):
    """The --data prepare_data.sh --shards prints; the recipe looked for DATA/train.idx in the whole
    string and refused it. Given the folder of the shards, it says how to join them."""
    shards = [sharded / "data" / f"shard{k}" for k in range(2)]
    args = ["--save-dir", tmp_path / "save", "--init", "random", "--updates", "1000", "--tokens-per-sample", "32",
            "--batch-size", "64", "--", "--arch", "unilmv2_tiny", "--max-epoch", "2", "--num-workers", "0"]
    proc = recipe("pretrain.sh", "--data", ":".join(map(str, shards)), *args)
    assert all(f"from: {shard / 'train'}\n" in proc.stdout for shard in shards)  # epoch 2 read shard 1
    proc = recipe("pretrain.sh", "--data", sharded / "data", *args, check=False)
    assert proc.returncode == 2 and proc.stderr == (
        f"pretrain.sh: error: no binarized train split in {sharded / 'data'}, but shards: give them as --data "
        f"{sharded / 'data' / 'shard0'}:{sharded / 'data' / 'shard1'}:... (what prepare_data.sh printed)\n")
