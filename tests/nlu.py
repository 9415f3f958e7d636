"""A tiny pre-trained unilmv2 checkpoint with its sentencepiece model and dictionary, for the
language-understanding tests (GLUE, SQuAD): built once per session, the way a user's would be
(sentencepiece, fairseq-preprocess with the pre-training layout, fairseq-train on
``pseudo_masked_lm``), but on a 10-word language; and GLUE and SQuAD files of that language
whose answers a tiny model can learn (the marker word ``zz``).
"""
import json
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


def marker_rte(folder, rng, sizes=(("train", 400), ("dev", 100))):
    """RTE-format pairs: 'entailment' iff the marker word is in sentence 1, else it is in
    sentence 2. Only the segment a token belongs to tells the two apart."""
    folder.mkdir(parents=True)
    for split, n in sizes:
        with open(folder / f"{split}.tsv", "w") as f:
            f.write("index\tsentence1\tsentence2\tlabel\n")
            for i in range(n):
                in_a = rng.random() < 0.5
                a, b = sentence(rng, rng.randint(3, 7), int(in_a)), sentence(rng, rng.randint(3, 7), int(not in_a))
                f.write(f"{i}\t{a}\t{b}\t{'entailment' if in_a else 'not_entailment'}\n")


def marker_squad(path, rng, n):
    """Passages of the tiny language; the answer to "zz ?" is the marker and the word after it,
    and a third of the passages have no marker (SQuAD 2.0: unanswerable). Passages run to 40
    words, so with --max-positions 32 they span several windows."""
    paragraphs = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 40))]
        answerable = rng.random() < 2 / 3
        k = rng.randrange(len(words) - 2)
        if answerable:
            words.insert(k, MARK)
        # a run of spaces after the first word of every passage
        starts, context = [], ""
        for j, w in enumerate(words):
            context += ("" if j == 0 else "  " if j == 1 else " ")
            starts.append(len(context))
            context += w
        qa = {"id": f"q{i}", "question": f"{MARK} ?", "is_impossible": not answerable, "answers": []}
        if answerable:
            answer = context[starts[k]:starts[k + 1] + len(words[k + 1])]
            qa["answers"] = [{"text": answer, "answer_start": starts[k]}]
        paragraphs.append({"context": context, "qas": [qa]})
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "marker", "paragraphs": paragraphs}]}))
    return path
