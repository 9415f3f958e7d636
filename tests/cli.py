"""Running the real fairseq command lines on tiny corpora, for the end-to-end tests."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_DIR = os.path.join(REPO, "fairseq_pmlm")
BIN = os.path.dirname(sys.executable)


def run(cmd, *args, check=True, env=None):
    """Run a fairseq console script of this environment; returns the CompletedProcess."""
    proc = subprocess.run(
        [os.path.join(BIN, cmd), *map(str, args)], capture_output=True, text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def write_corpus(path, documents):
    """documents: list of lists of sentences -> one sentence a line, blank line between."""
    with open(path, "w") as f:
        for doc in documents:
            f.write("\n".join(doc) + "\n\n")


def preprocess(tmp, documents, name="bin", srcdict=None):
    write_corpus(tmp / "train.txt", documents)
    write_corpus(tmp / "valid.txt", documents[:4])
    args = ["--only-source", "--trainpref", tmp / "train.txt", "--validpref", tmp / "valid.txt",
            "--destdir", tmp / name, "--workers", "1"]
    if srcdict:
        args += ["--srcdict", srcdict]
    run("fairseq-preprocess", *args)
    return tmp / name


def train(data, save_dir, *extra, check=True, arch="unilmv2_tiny"):
    args = [data, "--user-dir", USER_DIR, "--task", "pseudo_masked_lm", "--arch", arch,
            "--criterion", "pmlm", "--optimizer", "adam", "--lr", "2e-3", "--batch-size", "16",
            "--tokens-per-sample", "64", "--save-dir", save_dir, "--log-format", "json",
            "--num-workers", "0", "--seed", "3", "--cpu",
            "--required-batch-size-multiple", "1", *extra]  # tiny valid sets: see README
    return run("fairseq-train", *args, check=check)


def records(stderr_and_stdout, tag="train_inner"):
    """fairseq's json log records of one kind."""
    out = []
    for line in stderr_and_stdout.splitlines():
        marker = f"| {tag} | "
        if marker in line:
            out.append(json.loads(line.split(marker, 1)[1]))
    return out


def memorisable_documents():
    """A handful of fixed documents, repeated: learnable to near-perfect recall."""
    docs = [
        ["the quick brown fox jumps over the lazy dog .", "a stitch in time saves nine ."],
        ["all that glitters is not gold .", "fortune favours the bold and the brave ."],
        ["an apple a day keeps the doctor away .", "the early bird catches the worm ."],
        ["practice makes perfect in every craft .", "actions speak louder than words ."],
    ]
    return docs * 16
