"""A tiny sequence-to-sequence data directory and one short scripts/s2s/finetune.sh run on it,
built once a suite run (``built_once``) for test_finetune_guards.py and test_decode_alignment.py:

- raw pairs (a sentence -> its first two words) and a sentencepiece tokenizer trained on them;
- DATA: dict.txt from the tokenizer's pieces, train/valid/test binarized by fairseq-preprocess
  (in-process); the test split has an empty source line and an empty target line, kept as
  items of [EOS] alone, as fairseq-preprocess writes an empty line;
- SAVE: ``finetune.sh --checkpoint none`` (unilmv2_tiny, 2 updates) into it.
"""
import os
import random
import shutil

from built_once import built_once
from cli import preprocess_in_process, recipe

WORDS = "the a cat dog sat ran on mat in park big small red old sun".split()
TEST_PAIRS = 6
EMPTY_SOURCE, EMPTY_TARGET = 1, 3  # 0-based test lines with an empty side


def raw_pairs(raw):
    rng = random.Random(0)
    raw.mkdir()
    for split, n in (("train", 40), ("valid", 6), ("test", TEST_PAIRS)):
        sources = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7))) for _ in range(n)]
        targets = [" ".join(s.split()[:2]) for s in sources]
        if split == "test":
            sources[EMPTY_SOURCE], targets[EMPTY_TARGET] = "", ""
        (raw / f"{split}.source").write_text("".join(s + "\n" for s in sources))
        (raw / f"{split}.target").write_text("".join(t + "\n" for t in targets))
    return raw


def binarize(raw, data):
    """sentencepiece pieces of every raw line, then fairseq-preprocess with the pieces' dictionary."""
    import sentencepiece as spm

    data.mkdir()
    text = raw / "train.source"
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(data / "spm"), vocab_size=40,
                                   hard_vocab_limit=False, minloglevel=2)
    os.remove(data / "spm.vocab")
    sp = spm.SentencePieceProcessor(model_file=str(data / "spm.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i))]
    (data / "dict.txt").write_text("".join(f"{p} 1\n" for p in pieces))
    enc = data / "enc"
    enc.mkdir()
    for split in ("train", "valid", "test"):
        for side in ("source", "target"):
            lines = (raw / f"{split}.{side}").read_text().splitlines()
            (enc / f"{split}.{side}").write_text("".join(" ".join(sp.encode(x, out_type=str)) + "\n" for x in lines))
    preprocess_in_process("--source-lang", "source", "--target-lang", "target", "--trainpref", enc / "train",
                          "--validpref", enc / "valid", "--testpref", enc / "test", "--srcdict", data / "dict.txt",
                          "--tgtdict", data / "dict.txt", "--destdir", data, "--workers", "1")
    shutil.rmtree(enc)
    return data


def finetune(data, save, checkpoint="none", *more, check=True):
    """finetune.sh with the demo preset on unilmv2_tiny: 2 updates, no validation."""
    return recipe("s2s/finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", checkpoint,
                  "--save-dir", save, *more, "--", "--arch", "unilmv2_tiny", "--max-update", "2",
                  "--batch-size", "8", "--disable-validation", "--num-workers", "0", check=check)


def _build(tmp):
    raw = raw_pairs(tmp / "raw")
    data = binarize(raw, tmp / "data")
    finetune(data, tmp / "save")
    return raw, data, tmp / "save"


def tiny_s2s(tmp_path_factory):
    """(raw, data, save) of the suite run's tiny seq2seq run (built on first use: ``built_once``)."""
    return built_once(tmp_path_factory, "tiny_s2s", _build)
