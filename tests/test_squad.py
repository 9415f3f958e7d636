"""Extractive QA (SQuAD v1.1/v2.0): text <-> token alignment, passage windows, the official
EM/F1 and no-answer threshold, bad input, and fine-tuning through scripts/squad/finetune_squad.sh
(``fairseq-train --task pmlm_squad``, then predict_squad.py) on a tiny learnable set."""
import inspect
import json
import os
import random
import re
import sys

import pytest
import sentencepiece as spm
import torch

from fairseq_pmlm.data.span_alignment import align
from fairseq_pmlm.data.squad_features import EncodedExample, make_features, max_context, windows
from fairseq_pmlm.public_data.squad_json import SquadExample, SquadFormatError, read_squad_json
from fairseq_pmlm.scoring.squad_eval import compute_exact, compute_f1, evaluate, find_best_thresh, normalize_answer

from helpers import make_dictionary
from nlu import squad_recipe

# ---------------------------------------------------------------- alignment and windows

def stdlib_text():
    """Real English with punctuation: docstrings of stdlib modules, plus unicode and runs of
    whitespace (tabs, newlines, no-break spaces) that sentencepiece normalises away."""
    import argparse
    import collections
    import email
    import json as j
    import logging
    import string
    import textwrap
    docs = [inspect.getdoc(m) or "" for m in (argparse, collections, email, j, logging, string, textwrap)]
    docs += [inspect.getdoc(f) or "" for f in (textwrap.fill, collections.Counter, logging.basicConfig)]
    extra = "Café naïve façade — “quoted” 東京 ＡＢＣ ﬁnance Ωmega  \t two\u00a0spaces\n\n  end."
    return "\n".join(docs) + " " + extra


@pytest.fixture(scope="module")
def text_spm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spm")
    (tmp / "text.txt").write_text(stdlib_text())
    spm.SentencePieceTrainer.train(input=str(tmp / "text.txt"), model_prefix=str(tmp / "m"), vocab_size=400,
                                   model_type="bpe", minloglevel=2)
    return spm.SentencePieceProcessor(model_file=str(tmp / "m.model"))


def test_char_spans_round_trip_through_tokens_on_real_text(text_spm):
    rng = random.Random(0)
    text = stdlib_text()
    toks = align(text_spm, text)
    assert len(toks) > 500
    for i in range(len(toks)):  # every token covers text inside one word, in order
        covered = text[toks.starts[i]:toks.ends[i]]
        assert toks.starts[i] <= toks.ends[i] and not any(ch.isspace() for ch in covered)
        assert i == 0 or toks.starts[i] >= toks.starts[i - 1]
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    for _ in range(2000):  # a random run of whole words maps to tokens and back to itself
        a = rng.randrange(len(words))
        b = min(len(words) - 1, a + rng.randrange(8))
        span = (words[a][0], words[b][1])
        first, last = toks.token_span(*span)
        assert toks.char_span(first, last) == span, text[span[0]:span[1]]
    for i in range(len(toks)):  # and a token's own span maps back to it (or to its word)
        if toks.ends[i] > toks.starts[i]:
            first, last = toks.token_span(toks.starts[i], toks.ends[i])
            assert first <= i <= last and toks.starts[first] == toks.starts[i]
    # the unicode tail: text that NFKC changes still maps back to the original characters
    tail = text.index("Café")
    first, last = toks.token_span(tail, tail + len("Café naïve façade"))
    assert text[slice(*toks.char_span(first, last))] == "Café naïve façade"
    first, last = toks.token_span(text.index("ＡＢＣ"), text.index("ＡＢＣ") + 3)
    assert text[slice(*toks.char_span(first, last))] == "ＡＢＣ"


def test_wordpiece_spans_are_the_characters_each_piece_came_from(tmp_path):
    """Uncased WordPiece lowercases, strips accents and splits punctuation and CJK characters off
    words: before, every piece of such a word got the whole word's span, so the answer "Montréal"
    was trained and predicted as "Montréal," and a CJK answer as its whole sentence."""
    from fairseq_pmlm.text.tokenizer_files import piece_encoder
    from fairseq_pmlm.text.vocab import map_vocab

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "montreal", "is", "a", "city", "re", "##building",
              ",", ".", "北", "京", "是", "中", "国", "的", "首", "都", "。", "cafe"]
    (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in tokens))
    (tmp_path / "dict.txt").write_text(map_vocab(tokens).dict_txt())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    text = "北京是中国的首都。 Montréal, a city, is rebuilding its café."
    toks = align(piece_encoder(tmp_path), text)
    assert toks.pieces[:3] == ["北", "京", "是"] and "##building" in toks.pieces and "<unk>" in toks.pieces  # its
    for answer in ("北京", "中国的首都", "Montréal", "Montréal, a city", "rebuilding", "building", "café"):
        start = text.index(answer)
        first, last = toks.token_span(start, start + len(answer))
        assert text[slice(*toks.char_span(first, last))] == answer


@pytest.mark.parametrize("n,room,stride", [(1, 5, 2), (5, 5, 2), (6, 5, 2), (100, 27, 8), (97, 10, 10), (40, 7, 13)])
def test_windows_cover_every_passage_token(n, room, stride):
    spans = windows(n, room, stride)
    covered = set()
    for s, length in spans:
        assert 0 < length <= room and s + length <= n
        covered.update(range(s, s + length))
    assert covered == set(range(n))
    assert all(b[0] - a[0] == min(stride, a[1]) for a, b in zip(spans, spans[1:]))
    for t in range(n):  # exactly one window scores each token
        assert sum(max_context(spans, i, t) for i in range(len(spans))) == 1


def test_answer_targets_point_into_the_window_that_holds_them():
    d = make_dictionary()
    toks = align(type("SP", (), {"encode": lambda self, w, out_type: [w]})(), " ".join(f"w{i}" for i in range(30)))
    ids = [d.index(p) for p in toks.pieces]
    enc = EncodedExample([d.index("w99")], toks, ids, (12, 14))
    feats = make_features(0, enc, d, max_positions=14, doc_stride=4)  # room 10: windows at 0, 4, 8, ...
    for f in feats:
        inside = f.window_start <= 12 and 14 < f.window_start + f.window_len
        if inside:
            assert f.tokens[f.start:f.end + 1] == ids[12:15]
        else:
            assert f.start == f.end == 0  # [SOS]
        assert f.tokens[:3] == [d.bos(), d.index("w99"), d.eos()] and f.tokens[-1] == d.eos()
    assert sum(f.start > 0 for f in feats) >= 2  # the answer is in more than one window


def test_decoding_picks_the_best_legal_span_and_says_no_answer_above_the_threshold():
    import torch

    from fairseq_pmlm.data.squad_decode import best_answer

    d = make_dictionary()
    context = " ".join(f"w{i}" for i in range(12))
    toks = align(type("SP", (), {"encode": lambda self, w, out_type: [w]})(), context)
    enc = EncodedExample([d.index("w99")], toks, [d.index(p) for p in toks.pieces], None)
    feats = make_features(0, enc, d, max_positions=16, doc_stride=4)  # room 13: one window
    example = SquadExample("q", "w99", context)

    def logits(f, start_at, end_at, null=0.0):
        s, e = torch.full((len(f.tokens),), -5.0), torch.full((len(f.tokens),), -5.0)
        s[0] = e[0] = null
        for tok, score in start_at.items():
            if f.window_start <= tok < f.window_start + f.window_len:
                s[f.passage_offset + tok - f.window_start] = score
        for tok, score in end_at.items():
            if f.window_start <= tok < f.window_start + f.window_len:
                e[f.passage_offset + tok - f.window_start] = score
        return s, e

    # the best start and end (w3, w2) are in the wrong order; w3..w10 is 8 tokens long
    lg = [logits(f, {3: 9.0, 9: 4.0}, {2: 9.0, 10: 4.0, 11: 3.0}) for f in feats]
    assert len(feats) == 1
    assert best_answer(example, enc, feats, lg, max_answer_len=3)[0] == "w9 w10"
    assert best_answer(example, enc, feats, lg, max_answer_len=8)[0] == "w3 w4 w5 w6 w7 w8 w9 w10"
    # SQuAD 2.0: null score 2 * 5 against 4 + 5.5 -> odds 0.5: "" at threshold 0, the span at 1
    lg = [logits(f, {9: 4.0}, {10: 5.5}, null=5.0) for f in feats]
    assert best_answer(example, enc, feats, lg, version_2=True) == ("", pytest.approx(0.5))
    assert best_answer(example, enc, feats, lg, version_2=True, null_threshold=1.0)[0] == "w9 w10"


# ---------------------------------------------------------------- official EM / F1

def ex(qid, *answers, impossible=False):
    return SquadExample(qid, "q?", "context", [(a, 0) for a in answers], impossible)


def test_normalisation_is_the_official_one():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a pear and THE plum.") == "apple pear and plum"
    assert normalize_answer("theatre anthem") == "theatre anthem"  # articles only as whole words


def test_exact_match_and_f1_hand_values():
    assert compute_exact("the Eiffel Tower", "Eiffel tower.") == 1
    assert compute_f1("Denver Broncos", "the Broncos") == pytest.approx(2 / 3)  # p 1, r 1/2
    p, r = 2 / 4, 2 / 3
    assert compute_f1("in the year 1990", "year 1990 and 1991") == pytest.approx(2 * p * r / (p + r))
    assert compute_f1("", "") == 1 and compute_f1("", "x") == 0 and compute_f1("a", "") == 1  # "a" normalises to ""
    examples = [ex("1", "Denver Broncos", "the Denver Broncos", "Broncos"), ex("2", "1990s", "the 1990s"),
                ex("3", "Saint Peter's", "St. Peter"), ex("4", impossible=True)]
    preds = {"1": "Broncos!", "2": "the 1990", "3": "Peter", "4": ""}
    out = evaluate(examples, preds)
    # 1: exact via "Broncos"; 2: 0 / 0; 3: f1 max(2*(1/1)*(1/2)/(1.5), same) = 2/3; 4: "" == "" both 1
    assert out["exact"] == pytest.approx(100 * 2 / 4)
    assert out["f1"] == pytest.approx(100 * (1 + 0 + 2 / 3 + 1) / 4)
    assert out["HasAns_total"] == 3 and out["NoAns_exact"] == 100


def test_a_question_without_a_prediction_scores_0_in_v1_and_is_left_out_in_v2_as_the_official_scripts():
    v1 = [ex("1", "Denver Broncos"), ex("2", "1990s"), ex("3", "Peter"), ex("4", "Paris")]
    preds = {"1": "Denver Broncos", "2": "1990s", "3": "Peter"}
    out = evaluate(v1, preds)
    assert (out["exact"], out["total"], out["missing"]) == (75.0, 4, 1)  # was 100.0 over 3
    out = evaluate(v1 + [ex("5", impossible=True)], {**preds, "5": ""})
    assert (out["exact"], out["total"], out["missing"]) == (100.0, 4, 1)


def test_best_no_answer_threshold_hand_values():
    examples = [ex("a", "x"), ex("b", "y"), ex("c", impossible=True), ex("d", impossible=True)]
    preds = {"a": "x", "b": "wrong", "c": "z", "d": ""}
    odds = {"a": 0.1, "b": 0.5, "c": 0.9, "d": 0.3}
    exact = {"a": 1, "b": 0, "c": 0, "d": 1}
    has = {"a": True, "b": True, "c": False, "d": False}
    # all "" : 2 right. Sorted by odds a(+1)=3, d(0)=3, b(0)=3, c(-1)=2: best 3/4 at threshold 0.1
    assert find_best_thresh(preds, exact, odds, has) == (75.0, 0.1)
    out = evaluate(examples, preds, odds)
    assert out["best_exact"] == 75.0 and out["best_exact_thresh"] == 0.1 and out["exact"] == 50.0


# ---------------------------------------------------------------- bad input

def squad_file(tmp_path, qas, context="The cat sat on the mat.", name="train.json"):
    path = tmp_path / name
    paragraphs = [{"context": context, "qas": qas}]
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    return path


def test_malformed_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('{"data": [\n  {"title": "x",, }\n]}')
    with pytest.raises(SquadFormatError, match=r"dev\.json: line 2 column 17: malformed JSON"):
        read_squad_json(path, training=False, version_2=False)


def test_empty_question_names_file_and_id(tmp_path):
    path = squad_file(tmp_path, [{"id": "q7", "question": "  ", "answers": [{"text": "cat", "answer_start": 4}]}])
    with pytest.raises(SquadFormatError, match=r"train\.json: question q7: empty question"):
        read_squad_json(path, training=True, version_2=False)


def test_answer_not_matching_the_passage_is_skipped_and_counted(tmp_path, caplog):
    qas = [{"id": "ok", "question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]},
           {"id": "off", "question": "Who?", "answers": [{"text": "cat", "answer_start": 5}]},
           {"id": "typo", "question": "Where?", "answers": [{"text": "rug", "answer_start": 19}]}]
    path = squad_file(tmp_path, qas)
    examples, skipped = read_squad_json(path, training=True, version_2=False)
    assert [e.qid for e in examples] == ["ok"] and skipped == 2
    assert "skipped 2 questions" in caplog.text and "off, typo" in caplog.text
    examples, skipped = read_squad_json(path, training=False, version_2=False)  # evaluation keeps gold texts
    assert len(examples) == 3 and skipped == 0


def test_v2_question_in_a_v1_run_names_the_flag(tmp_path):
    path = squad_file(tmp_path, [{"id": "n1", "question": "Why?", "answers": [], "is_impossible": True}])
    with pytest.raises(SquadFormatError, match=r"question n1: is_impossible in a SQuAD v1.1 run \(SQuAD 2.0 data: "
                                               r"fine-tune with --squad-v2\)$"):
        read_squad_json(path, training=True, version_2=False)


def test_questions_without_answers_are_read_for_prediction_not_for_training(tmp_path):
    """predict_squad.py answers a file of questions alone; it stopped on "no answers"."""
    path = squad_file(tmp_path, [{"id": "u1", "question": "Who sat?"}, {"id": "u2", "question": "Where?",
                                                                          "answers": []}])
    examples, _ = read_squad_json(path, training=False, version_2=False)
    assert [(e.qid, e.answers, e.is_impossible) for e in examples] == [("u1", [], False), ("u2", [], False)]
    with pytest.raises(SquadFormatError, match=r"question u1: no answers and not is_impossible"):
        read_squad_json(path, training=True, version_2=False)


@pytest.mark.parametrize("data, where", [
    (["x"], r"data\[0\]: not a SQuAD article \(an object with a \"paragraphs\" list\)"),
    ([{"paragraphs": {"context": "c"}}], r"data\[0\]: not a SQuAD article"),
    ([{"paragraphs": ["c"]}], r"data\[0\].paragraphs\[0\]: not a SQuAD paragraph"),
    ([{"paragraphs": [{"context": "c", "qas": ["q"]}]}], r"data\[0\].paragraphs\[0\].qas\[0\]: not a question"),
    ([{"paragraphs": [{"context": "c", "qas": [{"id": "q", "question": "?", "answers": "c"}]}]}],
     r"question q: \"answers\" is not a list"),
])
def test_json_of_another_shape_names_the_file_and_the_place_not_a_traceback(tmp_path, data, where):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"data": data}))
    with pytest.raises(SquadFormatError, match=rf"^{re.escape(str(path))}: {where}"):
        read_squad_json(path, training=False, version_2=True)


@pytest.mark.parametrize("split, message", [("valid", r"^SQuAD file not found: .*nope\.json$"),
                                            ("train", r"^no SQuAD file for split 'train': pass --train-json$")])
def test_a_missing_squad_file_is_a_one_line_error(tmp_path, split, message):
    from fairseq_pmlm.errors import OneLineError
    from fairseq_pmlm.tasks.squad import PMLMSquadConfig, PMLMSquadTask

    task = PMLMSquadTask(PMLMSquadConfig(data=str(tmp_path), valid_json=str(tmp_path / "nope.json")),
                         make_dictionary(), sp=None)
    with pytest.raises(OneLineError, match=message):
        task.load_dataset(split)


def test_a_best_checkpoint_metric_validation_never_logs_is_one_line_before_training(tmp_path_factory, tmp_path):
    """--best-checkpoint-metric f1 (SQuAD's score, which only predict_squad.py computes): fairseq's
    KeyError traceback after the first validation, the training before it lost."""
    from cli import USER_DIR, run
    from nlu import marker_squad, pretrained

    pre = pretrained(tmp_path_factory)
    questions = marker_squad(tmp_path / "q.json", random.Random(0), 20)
    proc = run("fairseq-train", pre["data"], "--user-dir", USER_DIR, "--task", "pmlm_squad", "--criterion",
               "pmlm_squad", "--train-json", questions, "--valid-json", questions, "--squad-v2", "--max-positions",
               "32", "--doc-stride", "8", "--max-query-len", "8", "--arch", "unilmv2_tiny", "--finetune-from-model",
               pre["checkpoint"], "--optimizer", "adam", "--lr", "1e-3", "--batch-size", "8", "--max-update", "4",
               "--best-checkpoint-metric", "f1", "--maximize-best-checkpoint-metric", "--cpu", "--num-workers", "0",
               "--save-dir", tmp_path / "save", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "fairseq-train: error: --best-checkpoint-metric f1: pmlm_squad's validation logs loss, start_acc, end_acc, "
        "span_acc (EM and F1 come from scripts/squad/predict_squad.py after training)")
    assert "train_inner" not in proc.stdout and not (tmp_path / "save").exists()


def test_null_odds_asked_of_a_squad_1_1_checkpoint_is_one_line_before_any_answer(tmp_path_factory, tmp_path):
    """SQuAD 1.1 has no unanswerable questions: --null-odds was silently not written (and the
    official script then read no --na-prob-file)."""
    from cli import REPO, USER_DIR, run
    from nlu import marker_squad, pretrained

    pre = pretrained(tmp_path_factory)
    rng = random.Random(0)
    questions = marker_squad(tmp_path / "q.json", rng, 20)
    data = json.loads(questions.read_text())  # a SQuAD 1.1 file: no unanswerable question
    for art in data["data"]:
        for par in art["paragraphs"]:
            par["qas"] = [q for q in par["qas"] if q["answers"]]
    questions.write_text(json.dumps(data))
    run("fairseq-train", pre["data"], "--user-dir", USER_DIR, "--task", "pmlm_squad", "--criterion", "pmlm_squad",
        "--train-json", questions, "--valid-json", questions, "--max-positions", "32", "--doc-stride", "8",
        "--max-query-len", "8", "--arch", "unilmv2_tiny", "--finetune-from-model", pre["checkpoint"], "--optimizer",
        "adam", "--lr", "1e-3", "--batch-size", "8", "--max-update", "1", "--disable-validation", "--cpu",
        "--num-workers", "0", "--save-dir", tmp_path / "save")
    proc = run(sys.executable, os.path.join(REPO, "scripts", "squad", "predict_squad.py"), "--checkpoint",
               tmp_path / "save" / "checkpoint_last.pt", "--json", questions, "--out", tmp_path / "pred.json",
               "--null-odds", tmp_path / "odds.json", "--cpu", check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"predict_squad.py: error: --null-odds {tmp_path / 'odds.json'}: {tmp_path / 'save' / 'checkpoint_last.pt'} "
        "was fine-tuned for SQuAD 1.1 (no --squad-v2), which has no unanswerable questions and so no odds to write"]
    assert sorted(os.listdir(tmp_path)) == ["q.json", "save"]


# ---------------------------------------------------------------- fine-tuning end to end

@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory):
    return squad_recipe(tmp_path_factory).result()  # shared with the recipes' smoke test (tests/nlu.py)


def test_fine_tuned_span_model_reaches_high_exact_match_with_unanswerable_questions(fine_tuned):
    """scripts/squad/finetune_squad.sh: fairseq-train --task pmlm_squad (--cpu by the recipe's
    choice), then predict_squad.py's answers, scored here by the official evaluation."""
    save = fine_tuned["save"]
    examples, _ = read_squad_json(fine_tuned["dev"], training=False, version_2=True)
    preds = json.loads((save / "predictions.json").read_text())
    odds = json.loads((save / "null_odds.json").read_text())
    cfg = torch.load(save / "checkpoint_last.pt", weights_only=True, mmap=True)["cfg"]
    v2 = cfg["task"]["squad_v2"]
    assert cfg["common"]["cpu"]  # the recipe's own choice on this machine (--fp16 on a GPU)
    out = evaluate(examples, preds, odds)
    print("squad tiny dev:", json.dumps(out))
    assert v2 and out["total"] == 100
    assert out["exact"] >= 90 and out["HasAns_exact"] >= 85 and out["NoAns_exact"] >= 85, out
