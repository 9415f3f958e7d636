"""A tiny pre-trained unilmv2 checkpoint with its sentencepiece model and dictionary, for the
language-understanding tests (GLUE, SQuAD): built once per session, the way a user's would be
(sentencepiece, fairseq-preprocess with the pre-training layout, fairseq-train on
``pseudo_masked_lm``), but on a 10-word language.
"""
import random
import shutil

import sentencepiece as spm

from cli import binarize, train

WORDS = ["ka", "lo", "mi", "nu", "pe", "ro", "su", "ti"]
MARK = "zz"
_SHARED = {}


def sentence(rng, n, marks=0):
    """``n`` random WORDS with ``marks`` MARKs inserted at random places."""
    ws = [rng.choice(WORDS) for _ in range(n)]
    for _ in range(marks):
        ws.insert(rng.randint(0, len(ws)), MARK)
    return " ".join(ws)


def tokenizer(tmp_path_factory):
    """-> dict(data=a data directory with dict.txt and spm.model, as scripts/prepare_data.sh
    writes it, spm=its spm.model, dict=its dict.txt); the corpus is binarized there too."""
    if "tokenizer" not in _SHARED:
        tmp = tmp_path_factory.mktemp("pretrained")
        rng = random.Random(0)
        with open(tmp / "corpus.txt", "w") as f:
            for _ in range(100):
                f.write("\n".join(sentence(rng, rng.randint(3, 8), 1) + " ." for _ in range(3)) + "\n\n")
        spm.SentencePieceTrainer.train(input=str(tmp / "corpus.txt"), model_prefix=str(tmp / "spm"),
                                       vocab_size=40, model_type="bpe", minloglevel=2)
        sp = spm.SentencePieceProcessor(model_file=str(tmp / "spm.model"))
        with open(tmp / "corpus.txt") as f, open(tmp / "corpus.bpe", "w") as out:
            for line in f:
                out.write(" ".join(sp.encode(line.strip(), out_type=str)) + "\n" if line.strip() else "\n")
        data = binarize(tmp / "corpus.bpe", tmp / "corpus.bpe", tmp / "bin", in_process=True)
        shutil.copy(tmp / "spm.model", data / "spm.model")
        _SHARED["tokenizer"] = {"data": data, "spm": data / "spm.model", "dict": data / "dict.txt"}
    return _SHARED["tokenizer"]


def pretrained(tmp_path_factory):
    """``tokenizer`` plus checkpoint=checkpoint_last.pt of 2 pre-training updates on its corpus."""
    if "pretrained" not in _SHARED:
        tok = tokenizer(tmp_path_factory)
        save = tok["data"].parent / "ckpt"
        train(tok["data"], save, "--max-update", "2", "--no-epoch-checkpoints")
        _SHARED["pretrained"] = dict(tok, checkpoint=save / "checkpoint_last.pt")
    return _SHARED["pretrained"]
