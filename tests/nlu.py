"""A tiny pre-trained unilmv2 checkpoint and the GLUE and SQuAD recipes run from it, built once
per suite run (``built_once``) and shared by test_glue.py, test_squad.py and the recipes' smoke test
(test_recipes.py): the data and the checkpoint are made the way a user makes them
(scripts/prepare_data.sh, then docs/PRETRAINING.md's fairseq-train command), but on a 10-word language
whose GLUE and SQuAD questions a tiny model can learn (the marker word ``zz``).
"""
import json
import random

from built_once import built_once
from cli import recipe, submit, train

WORDS = ["ka", "lo", "mi", "nu", "pe", "ro", "su", "ti"]
MARK = "zz"
_FUTURES = {}  # this process's Futures of the GLUE and SQuAD runs (each run itself is ``built_once``)


def sentence(rng, n, marks=0):
    """``n`` random WORDS with ``marks`` MARKs inserted at random places."""
    ws = [rng.choice(WORDS) for _ in range(n)]
    for _ in range(marks):
        ws.insert(rng.randint(0, len(ws)), MARK)
    return " ".join(ws)


def tokenizer(tmp_path_factory):
    """-> dict(data=the directory scripts/prepare_data.sh wrote (dict.txt, spm.model, the corpus
    binarized), spm=its spm.model, dict=its dict.txt, prepare=the recipe's CompletedProcess)."""
    def build(tmp):
        rng = random.Random(0)
        with open(tmp / "corpus.txt", "w") as f:
            for _ in range(100):
                f.write("\n".join(sentence(rng, rng.randint(3, 8), 1) + " ." for _ in range(3)) + "\n\n")
        proc = recipe("prepare_data.sh", "--train", tmp / "corpus.txt", "--valid", tmp / "corpus.txt",
                      "--name", "bin", "--vocab-size", "40", "--destdir", tmp, "--workers", "1")
        data = tmp / "bin"
        return {"data": data, "spm": data / "spm.model", "dict": data / "dict.txt", "prepare": proc}

    return built_once(tmp_path_factory, "tokenizer", build)


def pretrained(tmp_path_factory):
    """``tokenizer`` plus checkpoint=checkpoint_last.pt of 2 pre-training updates on its corpus
    and log=their fairseq-train log (--log-format json, every update)."""
    def build(tmp):
        tok = tokenizer(tmp_path_factory)
        proc = train(tok["data"], tmp, "--max-update", "2", "--no-epoch-checkpoints", "--log-interval", "1")
        (tmp / "train.log").write_text(proc.stdout)
        return dict(tok, checkpoint=tmp / "checkpoint_last.pt", log=tmp / "train.log")

    return built_once(tmp_path_factory, "pretrained", build)


def prepare_glue(*args):
    """scripts/glue/prepare_glue.py ARGS: its main() in this process (saves fairseq's ~3 s import);
    it must succeed (its errors are an exit status now, not an exception)."""
    from fairseq_pmlm.public_data.glue import main

    from cli import run_main

    proc = run_main(main, *args)
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout, end="")


def glue_recipe(tmp_path_factory):
    """scripts/glue/finetune_glue.sh on marker RTE and counting STS-B data of 400 examples each
    (binarized by prepare_glue.py) from ``pretrained``: a tiny model, an lr for a tiny model, the
    rest the paper's schedule shape. -> {task: a Future of dict(lines=the recipe's summary lines,
    save=its save dir, data=the binarized task, tsv=the task's folder of TSV files)}."""
    if "glue" not in _FUTURES:
        pre = pretrained(tmp_path_factory)

        def data(tmp):  # binarized here: prepare_glue runs in this thread (it redirects sys.stdout)
            rng = random.Random(1)
            marker_rte(tmp / "RTE", rng)
            counting_stsb(tmp / "STS-B", rng)
            for task in ("RTE", "STS-B"):
                prepare_glue("--task", task, "--glue-dir", tmp / task, "--spm-model", pre["spm"],
                             "--srcdict", pre["dict"], "--destdir", tmp / f"bin-{task}")
            return tmp

        tmp = built_once(tmp_path_factory, "glue-data", data)
        def run(save, task):
            data = tmp / f"bin-{task}"
            return dict(lines=_glue_summary(data, save, pre), save=save, data=data, tsv=tmp / task)

        _FUTURES["glue"] = {task: submit(built_once, tmp_path_factory, f"glue-{task}",
                                         lambda save, task=task: run(save, task))
                            for task in ("RTE", "STS-B")}
    return _FUTURES["glue"]


def _glue_summary(data, save, pre):
    proc = recipe("glue/finetune_glue.sh", "--data", data, "--checkpoint", pre["checkpoint"], "--save-dir", save,
                  "--arch", "unilmv2_tiny", "--lr", "1e-3", "--batch-size", "16", "--epochs", "6", "--",
                  "--num-workers", "0", "--dropout", "0", "--attention-dropout", "0", "--max-positions", "64")
    return [line for line in proc.stdout.splitlines() if line.startswith("finetune_glue: ")]


def squad_recipe(tmp_path_factory):
    """scripts/squad/finetune_squad.sh (SQuAD 2.0, windows of 32 tokens, stride 8) on 400 marker
    questions from ``pretrained``, 300 updates, then its answers to 100 dev questions.
    -> a Future of dict(proc=the recipe's CompletedProcess, dev=the dev JSON, save=its save dir)."""
    if "squad" not in _FUTURES:
        pre = pretrained(tmp_path_factory)

        def build(tmp):
            rng = random.Random(2)
            marker_squad(tmp / "train.json", rng, 400)
            marker_squad(tmp / "dev.json", rng, 100)
            proc = recipe("squad/finetune_squad.sh", "--data", pre["data"], "--train-json", tmp / "train.json",
                          "--dev-json", tmp / "dev.json", "--checkpoint", pre["checkpoint"], "--save-dir", tmp / "ckpt",
                          "--v2", "--arch", "unilmv2_tiny", "--lr", "3e-3", "--batch-size", "32", "--max-positions",
                          "32", "--doc-stride", "8", "--", "--max-query-len", "8", "--warmup-updates", "20",
                          "--total-num-update", "300", "--max-update", "300", "--validate-interval", "100",
                          "--dropout", "0", "--attention-dropout", "0", "--num-workers", "0", "--seed", "1")
            return {"proc": proc, "dev": tmp / "dev.json", "save": tmp / "ckpt"}

        _FUTURES["squad"] = submit(built_once, tmp_path_factory, "squad", build)
    return _FUTURES["squad"]


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


def counting_stsb(folder, rng, sizes=(("train", 400), ("dev", 100))):
    """STS-B-format pairs scored 1.25 x (number of marker words in sentence 1, 0..3)."""
    folder.mkdir(parents=True)
    for split, n in sizes:
        with open(folder / f"{split}.tsv", "w") as f:
            f.write("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n")
            for i in range(n):
                k = rng.randint(0, 3)
                f.write(f"{i}\tg\tf\t2012\t{i}\ts\ts\t{sentence(rng, rng.randint(3, 6), k)}\t"
                        f"{sentence(rng, rng.randint(3, 6))}\t{1.25 * k:.3f}\n")
