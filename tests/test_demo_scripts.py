"""The pieces of the main job (scripts/demo.sh) that decide what its table says: the corpus,
its pairs and their lead-1 baseline (scripts/make_docstring_corpus.py) and the scorer's paired
bootstrap and examples (scripts/score.py, fairseq_pmlm/scoring/score_files.py)."""
import ast
import os
import subprocess
import sys

import pytest

from fairseq_pmlm.scoring import score_files as score

from cli import run_main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import make_docstring_corpus as corpus  # noqa: E402  (a script of the main job, not of the package)

SOURCE = '''"""A tiny module.

It exists for the tests, nothing else at all.
"""


class RawConfigParser:
    """Parse configuration files.

    The parser reads sections and options from files and strings alike.
    """

    def add_section(self, section, *, strict=True):
        """Create a new section in the configuration.

        Raise DuplicateSectionError if a section by the specified name already exists.
        >>> RawConfigParser().add_section("x")
        """


def getuser():
    """No body: not a pair."""
'''


def test_lead1_is_the_first_sentence_of_the_source():
    assert corpus.lead1("Return x. Then more text! And 'quoted' end.") == "Return x."
    assert corpus.lead1("e.g. lower case after a dot stays. Next one.") == "e.g. lower case after a dot stays."
    assert corpus.lead1("  One sentence only  ") == "One sentence only"


def test_identifiers_become_words():
    assert corpus.words("RawConfigParser") == "Raw Config Parser"
    assert corpus.words("add_section") == "add section"
    assert corpus.words("HTTPServer") == "HTTP Server"
    assert corpus.words("__init__") == "init"


def test_a_pair_is_the_heading_and_body_to_the_summary_line_without_doctests():
    pairs, sentences = corpus.module_text(ast.parse(SOURCE), "tiny")
    assert pairs == [
        ("class Raw Config Parser: The parser reads sections and options from files and strings alike.",
         "Parse configuration files."),
        ("Raw Config Parser . add section (section, strict): Raise DuplicateSectionError if a section by the "
         "specified name already exists.", "Create a new section in the configuration."),
    ]  # the module's body has fewer than 10 words; getuser has no body
    assert sentences[:3] == ["module tiny:", "A tiny module.", "It exists for the tests, nothing else at all."]
    assert "getuser ():" in sentences and not any(">>>" in s for s in sentences)


def test_held_out_pairs_never_stand_in_a_training_module():
    """Docstrings are copied between modules: a held-out pair whose body or summary is training
    text is dropped; training pairs are kept once each."""
    seen = ("a: the body of a pair that two modules share", "Shared summary.")
    own = ("b: a body only the held-out module has", "Its own summary.")
    copied_summary = ("c: another body entirely", "Shared summary.")
    modules = [([seen], ["Shared summary.", "the body of a pair that two modules share"]),  # train (i=0)
               ([seen, own, copied_summary], ["held-out text"]),  # held out (i % 2 == 1)
               ([seen], ["more training text"])]  # train: the duplicate pair is kept once
    docs, pairs = corpus.build(modules, held_out_every=2)
    assert pairs["train"] == [seen] and pairs["valid"] + pairs["test"] == [own]
    assert docs["valid"] == [["held-out text"]] and len(docs["train"]) == 2


def test_corpus_files_one_lead_line_per_source_and_held_out_pairs_unseen(tmp_path):
    out = tmp_path / "corpus"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "make_docstring_corpus.py"),
                           "--out", out, "--packages", "stdlib", "--max-modules", "120", "--held-out-every", "4"],
                          check=True, capture_output=True, text=True)
    assert "docstrings of Python" in proc.stdout
    train_text = (out / "pretrain.train.txt").read_text()
    for split in ("train", "valid", "test"):
        sources = (out / "pairs" / f"{split}.source").read_text().splitlines()
        leads = (out / "pairs" / f"{split}.lead").read_text().splitlines()
        targets = (out / "pairs" / f"{split}.target").read_text().splitlines()
        assert sources and len(leads) == len(sources) == len(targets)
        assert all(src.startswith(lead) for src, lead in zip(sources, leads))
    test = (out / "pairs" / "test.target").read_text().splitlines()
    assert not any(summary in train_text.splitlines() for summary in test)


@pytest.mark.parametrize("args, message", [(["--held-out-every", "1"], "at least 2"),
                                           (["--packages", "no_such_package_here"], "is not installed")])
def test_corpus_bad_flags_are_one_line_errors(tmp_path, args, message):
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "make_docstring_corpus.py"),
                           "--out", tmp_path / "x", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and message in proc.stderr and not (tmp_path / "x").exists()


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
                          capture_output=True, text=True, check=True)  # the script itself, as a user runs it
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
    proc = run_main(score.main, "--ref", tmp_path / "r", "--hyp", tmp_path / "r", *args)
    assert proc.returncode == 2 and message in proc.stderr
