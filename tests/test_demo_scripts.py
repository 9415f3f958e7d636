"""The pieces of the main job (scripts/demo.sh) that decide what its table says: the pairs and
their lead-1 baseline (scripts/make_stdlib_corpus.py) and the scorer's paired bootstrap and
examples (scripts/score.py)."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import make_stdlib_corpus  # noqa: E402
import score  # noqa: E402


def test_lead1_is_the_first_sentence_of_the_body():
    assert make_stdlib_corpus.lead1("Return x. Then more text! And 'quoted' end.") == "Return x."
    assert make_stdlib_corpus.lead1("e.g. lower case after a dot stays. Next one.") == \
        "e.g. lower case after a dot stays."
    assert make_stdlib_corpus.lead1("  One sentence only  ") == "One sentence only"


def test_pairs_come_with_one_lead_line_per_source_and_test_modules_are_held_out(tmp_path):
    out = tmp_path / "pairs"
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "make_stdlib_corpus.py"),
                    "--out", tmp_path / "train.txt", "--valid-out", tmp_path / "valid.txt",
                    "--valid-fraction", "0.25", "--max-docs", "60", "--pairs-out", out],
                   check=True, capture_output=True)
    for split in ("train", "valid", "test"):
        sources = (out / f"{split}.source").read_text().splitlines()
        leads = (out / f"{split}.lead").read_text().splitlines()
        assert len(leads) == len(sources)
        assert all(src.startswith(lead) for src, lead in zip(sources, leads))
    train_text = (tmp_path / "train.txt").read_text()
    test = (out / "test.target").read_text().splitlines()
    assert test and not any(summary in train_text for summary in test)


def test_paired_bootstrap_interval_brackets_the_mean_and_is_zero_for_identical_systems():
    a = [10.0, 30.0, 50.0, 20.0, 40.0] * 20
    mean, lo, hi = score.paired_bootstrap(a, a)
    assert mean == lo == hi == 0
    b = [x - 5 + (i % 3) for i, x in enumerate(a)]
    mean, lo, hi = score.paired_bootstrap(a, b)
    assert lo < mean < hi and lo > 0
    assert score.spread(122, 3) == [0, 60, 121] and score.spread(2, 3) == [0, 1]


def test_score_prints_the_table_the_bootstrap_and_the_examples(tmp_path):
    ref = tmp_path / "ref"
    ref.write_text("return the sum of two numbers\nopen a file for reading\nclose the socket\n")
    good, bad, src = tmp_path / "good", tmp_path / "bad", tmp_path / "src"
    good.write_text("return the sum of numbers\nopen a file\nclose the socket\n")
    bad.write_text("the the\nfile\nsocket socket\n")
    src.write_text("Add a and b. Returns their sum.\nOpens path.\nCloses it.\n")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "score.py"), "--ref", ref,
                           "--hyp", good, "--name", "good", "--hyp", bad, "--name", "bad",
                           "--bootstrap", "--examples", "2", "--source", src],
                          capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("| system | ROUGE-1") and lines[3].startswith("| good |")
    assert any(line.startswith("ROUGE-L good minus bad: +") for line in lines)
    assert "example 1 (test line 1)" in proc.stdout and "example 2 (test line 3)" in proc.stdout
    assert "  bad: socket socket" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--examples", "2"], "--examples needs --source"),
    (["--name", "a", "--name", "b"], "give one --name per --hyp"),
])
def test_score_bad_flags_are_one_line_errors(tmp_path, args, message):
    (tmp_path / "r").write_text("x\n")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "score.py"), "--ref", tmp_path / "r",
                           "--hyp", tmp_path / "r", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and message in proc.stderr
