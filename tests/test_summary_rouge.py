"""ROUGE of multi-sentence summaries (fairseq_pmlm/scoring/summaries.py, rouge155.py, scripts/score.py)
against the reference implementations, on real multi-sentence text (several hundred docstring
bodies of the standard library: reference = its first sentences, hypothesis = a draw of its
summary line and body sentences): ROUGE-1.5.5 itself, rouge-score's rougeLsum, and py-rouge (what
s2s-ft's evaluation calls without --perl) after s2s-ft's post-processing; and that
post-processing, step by step."""
import os
import random
import re
import subprocess
import sys
import types

import pytest

from fairseq_pmlm.scoring import rouge155, score_files, summaries

from cli import run_main
from helpers import stdlib_docstrings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ["argparse", "textwrap", "csv", "string", "shlex", "json/__init__", "logging/__init__", "subprocess",
           "typing", "collections/__init__", "functools", "pathlib", "tarfile", "email/message", "inspect",
           "threading", "socket", "ssl", "asyncio/events", "unittest/case", "datetime", "decimal", "enum",
           "dataclasses", "ftplib", "imaplib", "smtplib", "optparse", "configparser", "pickle", "random",
           "statistics", "fractions", "difflib", "heapq", "bisect", "copy", "pprint", "tempfile", "shutil",
           "glob", "fnmatch", "gettext", "locale", "calendar", "contextlib", "abc", "numbers", "operator",
           "weakref", "queue", "sched", "selectors", "signal", "codecs", "base64", "hashlib", "hmac", "secrets",
           "uuid", "ipaddress", "urllib/parse", "urllib/request", "http/client", "http/server", "xml/dom/minidom",
           "sqlite3/__init__", "warnings", "traceback", "pdb", "doctest", "trace", "timeit", "platform",
           "sysconfig", "zipimport", "gzip", "bz2", "lzma", "wave", "mailbox"]
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")
# the Perl modules ROUGE-1.5.5 reads: without them its tests skip, saying what to install
PERL_PROBLEM = rouge155.perl_missing()


@pytest.fixture(scope="module")
def pairs():
    """(hypothesis sentences, reference sentences) of ~600 docstrings with 2+ body sentences."""
    rng = random.Random(0)
    out = []
    for source, summary in stdlib_docstrings(MODULES)[0]:
        sents = [s for s in SENTENCE_END.split(source.split(": ", 1)[1]) if len(s.split()) >= 3]
        if len(sents) >= 2:
            pool = [summary] + sents[1:]
            out.append((rng.sample(pool, rng.randint(1, min(4, len(pool)))), sents[:3]))
    assert len(out) >= 500
    return out


def mean(values):
    return sum(values) / len(values)


def report(name, ours, theirs, keys):
    """Max |mean difference| over ``keys`` (printed: the figures docs/SEQ2SEQ.md quotes)."""
    diffs = {k: abs(mean(ours[k]) - mean(theirs[k])) for k in keys}
    worst = {k: max(abs(a - b) for a, b in zip(ours[k], theirs[k])) for k in keys}
    print(f"\n{name}: |mean difference| {diffs}, max per example {worst}, {len(ours[keys[0]])} examples")
    return max(diffs.values())


@pytest.mark.skipif(PERL_PROBLEM is not None, reason=f"ROUGE-1.5.5 cannot run: {PERL_PROBLEM}")
def test_summary_level_rouge_equals_rouge_155_itself_with_files2rouge_options(pairs):
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    ours = summaries.rouge_per_example(refs, hyps, tokenizer="rouge155")
    # files2rouge's options (-c 95 -r 1000 -n 2 -a) with stemming (-m): its ROUGE-L over the
    # sentence lines is the summary-level LCS, our ROUGE-Lsum
    perl = rouge155.run_perl(refs, hyps, options=("-c", "95", "-r", "1000", "-n", "2", "-a"))
    assert report("ROUGE-1.5.5", ours, perl, ["rouge1", "rouge2", "rougeLsum"]) < 0.1
    assert mean(ours["rougeLsum"]) - mean(ours["rougeL"]) > 1  # multi-sentence: the two ROUGE-Ls differ


def test_summary_level_rouge_equals_rouge_score_rougelsum_on_newline_joined_sentences(pairs):
    from rouge_score import rouge_scorer

    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeLsum"], use_stemmer=True)
    theirs = {k: [] for k in ("rouge1", "rouge2", "rougeLsum")}
    for h, r in zip(hyps, refs):
        for k, v in scorer.score("\n".join(r), "\n".join(h)).items():
            theirs[k].append(100 * v.fmeasure)
    assert report("rouge-score", summaries.rouge_per_example(refs, hyps, tokenizer="rouge155"), theirs,
                  ["rouge1", "rouge2", "rougeLsum"]) < 0.1
    # with rouge-score's own tokens, [X_SEP] lines are exactly its newline-joined sentences
    lines = summaries.rouge_per_example([" [X_SEP] ".join(r) for r in refs], [" [X_SEP] ".join(h) for h in hyps])
    assert report("rouge-score, its tokens", lines, theirs, ["rouge1", "rouge2", "rougeLsum"]) < 1e-9


@pytest.fixture
def py_rouge(monkeypatch):
    """py-rouge, runnable offline: it imports pkg_resources (gone from new setuptools) for its data
    files' paths, and tokenises through nltk's punkt sentence splitter, whose model cannot be
    downloaded here; on text of one sentence a line (all py-rouge sees: it splits summaries at
    newlines first) splitting at newlines is what punkt does."""
    import importlib.util

    base = os.path.dirname(importlib.util.find_spec("rouge").origin)
    stub = types.ModuleType("pkg_resources")
    stub.resource_filename = lambda package, name: os.path.join(base, name)
    monkeypatch.setitem(sys.modules, "pkg_resources", stub)
    import nltk.tokenize

    monkeypatch.setattr(nltk.tokenize, "sent_tokenize", lambda text, language="english": text.split("\n"))
    import rouge

    return rouge


def s2sft_tokens(text):
    """Text as s2s-ft's decoder writes it: lower-cased WordPiece words, punctuation apart."""
    return " ".join(re.findall(r"\w+|[^\w\s]", text.lower()))


@pytest.mark.parametrize("dataset", ["cnndm", "xsum"])
def test_s2sft_style_equals_py_rouge_after_the_same_post_processing(pairs, py_rouge, dataset):
    if dataset == "cnndm":
        hyps = [" [X_SEP] ".join(s2sft_tokens(s) for s in h) for h, _ in pairs]
        refs = [" <S_SEP> ".join(r) for _, r in pairs]
    else:  # one-sentence summaries
        hyps = [s2sft_tokens(" ".join(h[:2])) for h, _ in pairs]
        refs = [r[0] for _, r in pairs]
    post = [summaries.s2sft_hypothesis(h, dataset) for h in hyps]
    gold = [summaries.s2sft_reference(r) for r in refs]
    ours = summaries.rouge_per_example(gold, post, tokenizer="rouge155")
    # s2s-ft's evaluator prints ROUGE-1/2 of this configuration; its weight_factor=1.2 also raises
    # ROUGE-L's P and R to the power 1/1.2 (a py-rouge quirk), so ROUGE-L is compared at 1.0: the
    # summary-level LCS, what s2s-ft's --perl path reports
    theirs = {}
    for metrics, weight in ((["rouge-n"], 1.2), (["rouge-l"], 1.0)):
        evaluator = py_rouge.Rouge(metrics=metrics, max_n=2, limit_length=False, apply_avg=False, weight_factor=weight)
        for name, per in evaluator.get_scores(["\n".join(p) for p in post], [["\n".join(g)] for g in gold]).items():
            theirs[{"rouge-1": "rouge1", "rouge-2": "rouge2", "rouge-l": "rougeLsum"}[name]] = \
                [100 * x["f"][0] for x in per]
    assert report(f"py-rouge, s2s-ft {dataset}", ours, theirs, ["rouge1", "rouge2", "rougeLsum"]) < 0.01
    assert sum(len(p) for p in post) < sum(len(h.split("[X_SEP]")) for h in hyps) or dataset == "xsum"


@pytest.mark.skipif(PERL_PROBLEM is not None and "perl is not installed" in PERL_PROBLEM, reason="no perl")
def test_the_porter_stemmer_is_rouge_155s_own_word_for_word(pairs, tmp_path):
    """ROUGE's stemmer differs from nltk's (argument -> argum, always -> alwai): run its own."""
    script = os.path.join(os.path.dirname(os.path.dirname(rouge155.exception_lists_dir())), "ROUGE-1.5.5.pl")
    lines = open(script, encoding="latin-1").read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("local %step2list"))
    (tmp_path / "stem.pl").write_text("\n".join(lines[start:]) + '\ninitialise();\nwhile (<STDIN>) { chomp; '
                                                                 'print stem($_), "\\n"; }\n')
    words = sorted({t for h, r in pairs for s in h + r for t in rouge155.tokenize(s, stem=False) if len(t) > 2})
    stems = subprocess.run(["perl", tmp_path / "stem.pl"], input="\n".join(words) + "\n", capture_output=True,
                           text=True, check=True).stdout.split("\n")
    assert len(words) > 3000
    assert [w for w, s in zip(words, stems) if rouge155.porter_stem(w) != s] == []
    assert rouge155.tokenize("Children went to arguments, always.") == ["child", "go", "to", "argum", "alwai"]


# ---- s2s-ft's post-processing, step by step --------------------------------------------------

@pytest.mark.parametrize("text, cnndm, xsum", [
    ('he said " yes " ( twice ) [ sic ]', "he said `` yes '' -LRB- twice -RRB- -LSB- sic -RSB-",
     'he said " yes " ( twice ) [ sic ]'),
    ("they don ' t know john ' s ' plan '", "they do n't know john 's ` plan '", "they do n't know john 's ' plan '"),
    ("it cost $ 3 , 000 or 3 . 5 % . . .", "it cost $ 3,000 or 3.5 % ...", "it cost $ 3,000 or 3.5 % ..."),
    ("the U . N . said", "the U.N. . said", "the U.N. . said"),  # s2s-ft consumes two tokens: the dot stays
    ("a well - known - - and - b", "a well-known -- and-b", "a well - known - - and - b"),
])
def test_ptb_retokenisation_of_each_rule(text, cnndm, xsum):
    assert summaries.ptb_retokenize(text, "cnndm") == cnndm
    assert summaries.ptb_retokenize(text, "xsum") == xsum


def test_cnndm_post_processing_drops_short_and_repeated_sentences_then_keeps_60_tokens():
    long = " ".join(f"w{i}" for i in range(50))
    text = " [X_SEP] ".join(["one two three four", "the cat ( a tabby ) sat on the mat .", "five six seven eight nine",
                             "the cat sat on the mat today .", long, "a b c d e f g h i j k l"])
    assert summaries.s2sft_hypothesis(text, "cnndm") == [
        "the cat -LRB- a tabby -RRB- sat on the mat .",  # "one two three four" (<= 4 tokens) dropped
        "five six seven eight nine",  # "the cat sat on the mat today": 6 of its 7 words came before (> 0.7)
        " ".join(f"w{i}" for i in range(44)),  # 11 + 5 + 44 = 60 tokens: the rest is cut
    ]
    assert summaries.s2sft_hypothesis(text, "cnndm", trunc_len=0)[-1] == "a b c d e f g h i j k l"
    assert summaries.s2sft_hypothesis(text, "cnndm", duplicate_rate=1)[2] == "the cat sat on the mat today ."


def test_xsum_post_processing_is_one_sentence_round_brackets_only_and_no_truncation():
    text = "the (pm) visited [ the ] town " + " ".join(["again"] * 70)
    out = summaries.s2sft_hypothesis(text, "xsum")
    assert len(out) == 1 and out[0].startswith("the -LRB- pm -RRB- visited [ the ] town again")
    assert len(out[0].split()) == 9 + 70


# ---- reading summaries -------------------------------------------------------------------------

def test_sentence_files_and_separator_lines_are_the_same_examples(tmp_path):
    examples = [["a cat sat .", "it slept ."], [], ["one more ."]]
    text = summaries.sentence_blocks(examples)
    assert text == "a cat sat .\nit slept .\n\n\none more .\n\n"
    assert summaries.parse_sentence_blocks(text.split("\n")[:-1]) == examples
    assert summaries.sentences("a cat sat . [X_SEP] it slept . <S_SEP> end") == ["a cat sat .", "it slept .", "end"]
    (tmp_path / "ref.sentences").write_text(summaries.sentence_blocks([["the cat sat .", "it was happy ."],
                                                                       ["a dog ran ."]]))
    (tmp_path / "ref.s2sft").write_text("the cat sat . <S_SEP> it was happy .\na dog ran .\n")
    (tmp_path / "hyp").write_text("it was happy . [X_SEP] the cat sat on a mat .\nthe dog ran away .\n")
    tables = []
    for ref in ("ref.sentences", "ref.s2sft"):  # (and [X_SEP] lines: the end-to-end test's references)
        proc = run_main(score_files.main, "--hyp", tmp_path / "hyp", "--ref", tmp_path / ref, "--preset", "cnndm",
                        "--style", "both")
        assert proc.returncode == 0, proc.stderr
        tables.append(proc.stdout.splitlines()[1:])
    assert tables[0] == tables[1]
    plain = [cell.strip() for cell in tables[0][2].strip("|").split("|")]
    assert plain[3] != plain[4]  # ROUGE-L (one sequence) and ROUGE-Lsum (sentence by sentence) differ


def test_score_preset_style_needs_a_preset_and_perl_says_what_to_install(tmp_path):
    (tmp_path / "r").write_text("x\n")
    proc = run_main(score_files.main, "--ref", tmp_path / "r", "--hyp", tmp_path / "r", "--style", "s2s-ft")
    assert proc.returncode == 2 and "--style s2s-ft needs --preset cnndm or xsum" in proc.stderr


def test_empty_hypothesis_and_reference_files_are_one_line_error_not_a_table_of_zeros(tmp_path):
    (tmp_path / "empty").write_text("")
    (tmp_path / "no-newline").write_text("a b\nc d")  # a last line without a newline is an example
    proc = run_main(score_files.main, "--ref", tmp_path / "empty", "--hyp", tmp_path / "empty")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"score.py: error: {tmp_path / 'empty'} holds no example (an empty file): nothing to score\n"
    proc = run_main(score_files.main, "--ref", tmp_path / "no-newline", "--hyp", tmp_path / "no-newline")
    assert proc.returncode == 0 and proc.stdout.startswith("2 references: "), proc.stderr


def test_the_fairseq_scorer_splits_at_the_separator_a_wordpiece_vocabulary_carries_it_in():
    from fairseq_pmlm.scoring.rouge import RougeScorer, RougeScorerConfig

    scorers = {sep: RougeScorer(RougeScorerConfig(rouge_tokenizer="rouge155", rouge_separator=sep))
               for sep in ("[X_SEP]", "[unused0]")}
    for sep, scorer in scorers.items():
        scorer.add_string(f"the cat sat . {sep} it was happy .", f"it was happy . {sep} the cat sat on a mat .")
    a, b = (s.scores() for s in scorers.values())
    assert a == b and a["rougeLsum"] > a["rougeL"]
    assert summaries.rouge_scores(["the cat sat"], ["the cat sat"], tokenizer="rouge155")["rougeLsum"] == 100
