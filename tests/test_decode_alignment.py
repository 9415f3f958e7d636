"""Decoding and scoring line up with the references and leave nothing half-done: every test pair
is decoded (empty sides included) and hyp.txt has one line per reference, in order; a test split
and references of different lengths stop generate.sh before the decode; its outputs are moved
into place step by step (never a mix of two runs, no temp files after a failure or a signal);
score.py, the hub and fairseq-interactive answer bad text and bad arguments in one line."""
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from fairseq.data import ListDataset

from fairseq_pmlm.tasks.pmlm_seq2seq import WordDropPairDataset

from cli import BIN, ENV, REPO, USER_DIR, recipe
from conftest import make_dictionary
from tiny_s2s import EMPTY_SOURCE, EMPTY_TARGET, TEST_PAIRS, tiny_s2s

SCORE = os.path.join(REPO, "scripts", "score.py")
GENERATE = ["--preset", "demo", "--", "--max-len-b", "4", "--beam", "2", "--batch-size", "4"]


def generate(data, save, refs, out, check=True):
    return recipe("s2s/generate.sh", "--data", data, "--checkpoint", save / "checkpoint_last.pt", "--refs", refs,
                  "--out-dir", out, *GENERATE, check=check)


def lines_by_id(log, tag):
    """{id: text} of fairseq-generate's TAG-<id> lines (D: detokenised hypothesis, T: reference)."""
    rows = [line.split("\t") for line in log.splitlines() if line.startswith(f"{tag}-")]
    return {int(r[0][2:]): r[-1] for r in rows}


# ---- the task: which pairs of a split are used ------------------------------------------------

@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_test_splits_keep_pairs_with_an_empty_side_train_and_valid_skip_them(split, caplog):
    d = make_dictionary()
    src = [torch.tensor([d.bos(), 5, 6, d.eos()]), torch.tensor([d.bos(), d.eos()]),
           torch.tensor([d.bos(), 7, d.eos()])]
    tgt = [torch.tensor([8, d.eos()]), torch.tensor([9, d.eos()]), torch.tensor([d.eos()])]
    sizes = (np.array([len(t) for t in src]), np.array([len(t) for t in tgt]))
    ds = WordDropPairDataset(ListDataset(src, sizes[0]), sizes[0], d, ListDataset(tgt, sizes[1]), sizes[1], d,
                             empty=np.array([False, True, True]), split=split)
    with caplog.at_level(logging.WARNING):
        kept, ignored = ds.filter_indices_by_size(np.arange(3), (16, 16))
    if split == "test":
        assert kept.tolist() == [0, 1, 2] and "2 pairs with an empty source or target line are decoded" in caplog.text
    else:
        assert kept.tolist() == [0] and f"{split}: skipped 2 pairs with an empty source or target line" in caplog.text
    assert ignored == []


def test_train_and_valid_targets_cut_to_the_positions_are_counted_in_the_log_test_references_stay_whole(
        tmp_path_factory, caplog):
    from fairseq_pmlm.tasks.pmlm_seq2seq import PMLMSeq2SeqConfig, PMLMSeq2SeqTask

    _, data, _ = tiny_s2s(tmp_path_factory)
    limit = 3
    task = PMLMSeq2SeqTask.setup_task(PMLMSeq2SeqConfig(data=str(data), seed=1, max_target_positions=limit))
    for split in ("valid", "test"):
        with caplog.at_level(logging.INFO):
            caplog.clear()
            task.load_dataset(split)
        binarized = task._side(split, "target")  # (kept: its sizes are a view of its file's memory map)
        whole = binarized.sizes  # EOS included
        lengths = [len(task.datasets[split][i]["target"]) for i in range(len(whole))]
        longer = int((whole > limit).sum())
        if split == "valid":
            assert 0 < longer < len(whole) and max(lengths) == limit
            assert (f"valid: {longer} of {len(whole)} targets are longer than --max-target-positions {limit} and "
                    "cut to it") in caplog.text
        else:
            assert longer and lengths == whole.tolist() and "targets are longer" not in caplog.text


# ---- generate.sh --------------------------------------------------------------------------------

def test_generate_writes_one_hypothesis_per_reference_in_order_and_each_file_once_its_step_succeeded(
        tmp_path_factory, tmp_path):
    """Decoding succeeds and scoring fails (a reference line that is not UTF-8): this run's log
    and hypotheses are in place, an earlier run's scores are gone (test_recipes.py runs the
    recipe through to its scores)."""
    raw, data, save = tiny_s2s(tmp_path_factory)
    out = tmp_path / "gen"
    out.mkdir()
    for name in ("generate-test.txt", "hyp.txt", "scores.txt"):  # an earlier run's
        (out / name).write_text("stale\n" * 100)
    refs = tmp_path / "test.target"  # the right length, a byte that is not UTF-8 on line 3
    lines = raw.joinpath("test.target").read_bytes().split(b"\n")
    refs.write_bytes(b"\n".join(lines[:2] + [lines[2] + b" caf\xe9"] + lines[3:]))

    proc = generate(data, save, refs, out, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f"score.py: error: {refs} line 3: not UTF-8 text (byte 0xe9 " \
                                                   f"at byte {len(lines[2]) + 5} of the line)"
    assert sorted(os.listdir(out)) == ["generate-test.txt", "hyp.txt"]
    log = (out / "generate-test.txt").read_text()
    hyps, references = lines_by_id(log, "D"), lines_by_id(log, "T")
    assert sorted(hyps) == sorted(references) == list(range(TEST_PAIRS))  # the pairs with an empty side too
    raw_refs = raw.joinpath("test.target").read_text().splitlines()
    assert raw_refs[EMPTY_TARGET] == "" and raw.joinpath("test.source").read_text().splitlines()[EMPTY_SOURCE] == ""
    assert [references[i] for i in range(TEST_PAIRS)] == raw_refs  # fairseq's pair i is reference line i
    assert (out / "hyp.txt").read_text().splitlines() == [hyps[i] for i in range(TEST_PAIRS)]


def test_a_test_split_and_references_of_different_lengths_stop_before_decoding(tmp_path_factory, tmp_path):
    raw, data, save = tiny_s2s(tmp_path_factory)
    refs = tmp_path / "short.target"
    refs.write_text("".join(raw.joinpath("test.target").read_text().splitlines(keepends=True)[:-1]))
    out = tmp_path / "gen"
    proc = generate(data, save, refs, out, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"s2s/generate.sh: error: {data}/test.source-target.source.idx holds {TEST_PAIRS} test "
                           f"pairs but --refs {refs} has {TEST_PAIRS - 1} lines\n")
    assert not out.exists()


def test_generate_with_nbest_writes_the_best_hypothesis_of_each_pair_and_refuses_flags_hiding_its_log(
        tmp_path_factory, tmp_path):
    """fairseq-generate --nbest N prints N D-lines a pair, best first: hyp.txt takes the first (it
    stopped with "12 hypotheses, not one for each ... skipped?"). --results-path and --quiet after
    -- left no log where the recipe reads it (an `mv: cannot stat` or "0 hypotheses"), another
    --gen-subset decoded pairs that are not --refs'."""
    raw, data, save = tiny_s2s(tmp_path_factory)
    out = tmp_path / "gen"
    proc = recipe("s2s/generate.sh", "--data", data, "--checkpoint", save / "checkpoint_last.pt", "--refs",
                  raw / "test.target", "--out-dir", out, *GENERATE, "--nbest", "2")
    log = (out / "generate-test.txt").read_text()
    assert sum(line.startswith("D-") for line in log.splitlines()) == 2 * TEST_PAIRS
    firsts = {}
    for line in log.splitlines():
        if line.startswith("D-"):
            firsts.setdefault(int(line.split("\t")[0][2:]), line.split("\t")[-1])
    assert (out / "hyp.txt").read_text().splitlines() == [firsts[i] for i in range(TEST_PAIRS)]
    assert "ROUGE-L" in proc.stdout
    # fairseq's summary line first, then score.py's table (it printed the last pair's P- line of scores too),
    # each named (fairseq's scores the binarized references, so the two can differ)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("fairseq-generate's own score (of the binarized references: <unk> where")
    assert lines[1].startswith("Generate test with beam=2: ROUGE-1 ") and lines[2] == "score.py on --refs as written:"
    for extra, flag in ((["--results-path", tmp_path / "elsewhere"], "--results-path"), (["--quiet"], "--quiet"),
                        (["--gen-subset=valid"], "--gen-subset valid")):
        proc = recipe("s2s/generate.sh", "--data", data, "--checkpoint", save / "checkpoint_last.pt", "--refs",
                      raw / "test.target", "--out-dir", tmp_path / "refused", *GENERATE, *extra, check=False)
        assert proc.returncode == 2 and proc.stderr.startswith(f"s2s/generate.sh: error: {flag} after --: ")
        assert len(proc.stderr.splitlines()) == 1 and not (tmp_path / "refused").exists()
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("how", ["SIGTERM to the recipe", "Ctrl-C (SIGINT to its process group)"])
def test_a_signal_during_decoding_stops_it_and_leaves_no_temporary_or_partial_file(how, tmp_path_factory, tmp_path):
    raw, data, save = tiny_s2s(tmp_path_factory)
    out = tmp_path / "gen"
    out.mkdir()
    earlier = {name: f"an earlier run's {name}\n" for name in ("generate-test.txt", "hyp.txt", "scores.txt")}
    for name, text in earlier.items():
        (out / name).write_text(text)
    proc = subprocess.Popen(["bash", os.path.join(REPO, "scripts", "s2s", "generate.sh"), "--data", data,
                             "--checkpoint", save / "checkpoint_last.pt", "--refs", raw / "test.target",
                             "--out-dir", out, *GENERATE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **ENV}, cwd=REPO, start_new_session=True)
    deadline = time.time() + 60
    while len(os.listdir(out)) == len(earlier) and time.time() < deadline:
        time.sleep(0.05)
    assert any(n.startswith(".generate.") for n in os.listdir(out)), "the decode's temporary directory never appeared"
    time.sleep(0.3)  # fairseq-generate has started
    if how.startswith("SIGTERM"):
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == (143 if how.startswith("SIGTERM") else 130)
    time.sleep(0.5)  # a surviving fairseq-generate would recreate its results directory
    assert {name: (out / name).read_text() for name in os.listdir(out)} == earlier  # untouched, nothing added


# ---- score.py --------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["--ref", "--hyp", "--source"])
def test_score_names_the_file_and_line_of_text_that_is_not_utf8(bad, tmp_path):
    good = tmp_path / "good"
    good.write_text("a b\nc d\ne f\n")
    broken = tmp_path / "broken"
    broken.write_bytes(b"a b\r\nc d\r\n\xff\xfe e\r\n")  # CRLF lines: the \r is not part of the text
    files = {"--ref": good, "--hyp": good, "--source": good, bad: broken}
    proc = subprocess.run([sys.executable, SCORE, "--ref", files["--ref"], "--hyp", files["--hyp"],
                           "--examples", "1", "--source", files["--source"]], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"score.py: error: {broken} line 3: not UTF-8 text (byte 0xff at byte 1 of the line)\n"


# ---- the hub and fairseq-interactive ---------------------------------------------------------

@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    _, _, save = tiny_s2s(tmp_path_factory)
    return UniLMv2Model.from_pretrained(str(save))


def test_hub_refuses_an_empty_source_and_a_beam_below_one_naming_them(hub):
    with pytest.raises(ValueError, match=r"generate: source 0 is empty"):
        hub.sample([""])
    with pytest.raises(ValueError, match=r"generate: source 1 is empty"):
        hub.sample(["the cat sat", "   "], beam=2)
    for beam in (0, -1, 1.5):
        with pytest.raises(ValueError, match=rf"generate: beam must be a positive int .*got {beam}"):
            hub.sample(["the cat sat"], beam=beam)
    assert isinstance(hub.sample("the cat sat", beam=1, max_len_b=4), str)  # control


def test_hub_replaces_characters_that_are_not_unicode_and_goes_on(hub, caplog):
    undecodable = b"the cat \xff sat".decode("utf-8", "surrogateescape")  # as sys.stdin reads such bytes
    with caplog.at_level(logging.WARNING):
        got = hub.sample([undecodable, "the dog"], beam=2, max_len_b=4)
    assert got == hub.sample(["the cat \ufffd sat", "the dog"], beam=2, max_len_b=4)
    assert "replaced 1 character(s) that are not valid Unicode" in caplog.text
    assert hub.encode(undecodable).tolist() == hub.encode("the cat \ufffd sat").tolist()


def test_interactive_session_goes_on_past_a_line_that_is_not_utf8(tmp_path_factory):
    """Under a strict UTF-8 stdin (a UTF-8 locale) as under C.UTF-8's surrogateescape."""
    _, data, save = tiny_s2s(tmp_path_factory)
    lines = b"the cat sat\nthe \xff dog ran\nthe red sun\n"
    proc = subprocess.run([os.path.join(BIN, "fairseq-interactive"), data, "--user-dir", USER_DIR, "--task",
                           "pmlm_seq2seq", "--path", save / "checkpoint_last.pt", "--beam", "2", "--max-len-b", "4",
                           "--cpu", "--bpe", "sentencepiece", "--sentencepiece-model", data / "spm.model"],
                          input=lines, capture_output=True, timeout=120,
                          env={**os.environ, **ENV, "PYTHONIOENCODING": "utf-8:strict"})
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-2000:]
    assert [line.split("\t")[0] for line in out.splitlines() if line.startswith("H-")] == ["H-0", "H-1", "H-2"]
    assert "replaced 1 character(s) that are not valid Unicode" in out + proc.stderr.decode("utf-8", "replace")


def test_interactive_with_stdin_closed_ends_as_on_empty_input(tmp_path_factory):
    """`fairseq-interactive ... <&-` (stock fairseq too) ended in an AttributeError traceback."""
    _, data, save = tiny_s2s(tmp_path_factory)
    proc = subprocess.run([os.path.join(BIN, "fairseq-interactive"), data, "--user-dir", USER_DIR, "--task",
                           "pmlm_seq2seq", "--path", save / "checkpoint_last.pt", "--max-len-b", "4", "--cpu"],
                          preexec_fn=lambda: os.close(0), capture_output=True, text=True, timeout=120,
                          env={**os.environ, **ENV})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not any(line.startswith("H-") for line in proc.stdout.splitlines())


def test_raw_text_without_the_bpe_flags_is_told_once_which_flags_to_add(tmp_path_factory, caplog):
    """fairseq-interactive tokenises its input only with --bpe flags: without them raw words meet a
    dictionary of sentencepiece pieces, mostly as <unk>, and the output is noise. The task says so
    once, naming the data's flags; input of the dictionary's own symbols is not warned about."""
    from omegaconf import OmegaConf

    from fairseq_pmlm.tasks.pmlm_seq2seq import PMLMSeq2SeqConfig, PMLMSeq2SeqTask

    _, data, _ = tiny_s2s(tmp_path_factory)
    task = PMLMSeq2SeqTask.setup_task(PMLMSeq2SeqConfig(data=str(data), seed=1))
    d = task.source_dictionary
    own = " ".join(d.symbols[d.nspecial:d.nspecial + 3])  # pieces of the dictionary, e.g. "\u2581the"
    raw, pieces = (d.encode_line(line, add_if_not_exist=False) for line in ("the cat sat", own))
    assert d.unk() not in pieces.tolist() and raw.tolist().count(d.unk()) == 3
    assert task.build_bpe(OmegaConf.create({"_name": None})) is None  # what fairseq-interactive asks without --bpe
    with caplog.at_level(logging.WARNING):
        task.build_dataset_for_inference([pieces], [len(pieces)])
        assert "are <unk>" not in caplog.text
        task.build_dataset_for_inference([raw, raw], [len(raw)] * 2)
        task.build_dataset_for_inference([raw], [len(raw)])
    assert caplog.text.count("are <unk>") == 1
    assert ("6 of 6 source tokens are <unk>: the input is raw text and no --bpe was given; this data's tokenizer: "
            f"--bpe sentencepiece --sentencepiece-model {data / 'spm.model'}") in caplog.text


@pytest.mark.parametrize("flag, value, message", [
    # fairseq's aligning generator reads attention weights, which the model's kernels do not
    # return: fairseq-generate --print-alignment decoded a batch, then raised an IndexError
    ("print_alignment", "hard", r"^--print-alignment: a unilmv2 model has no source-target attention"),
    # fairseq switches on FairseqDropout modules; the layers' dropout runs in training only, so
    # --retain-dropout decoded exactly as without it, silently
    ("retain_dropout", True, r"^--retain-dropout: a unilmv2 model applies dropout in training only"),
    # fairseq's generator asserted "min_len cannot be larger than max_len" at the first batch
    ("max_len_b", 0, r"^--max-len-b 0 allows fewer target tokens than --min-len 1$"),
])
def test_generation_flags_the_model_cannot_honour_are_refused_in_one_line(hub, flag, value, message):
    from fairseq_pmlm.errors import BadInput

    args = hub.cfg.generation.copy()
    setattr(args, flag, value)
    with pytest.raises(BadInput, match=message):
        hub.task.build_generator(hub.models, args)
    setattr(args, flag, hub.cfg.generation[flag])
    hub.task.build_generator(hub.models, args)  # control


def test_score_reference_refuses_a_test_pair_longer_than_the_positions_in_one_line(hub, tmp_path_factory,
                                                                                    monkeypatch):
    """Test references are kept whole; --score-reference feeds each after its source, and a pair that
    did not fit raised a ValueError mid-run (after the batches before it were printed)."""
    from fairseq_pmlm.errors import BadInput
    from fairseq_pmlm.tasks.pmlm_seq2seq import PMLMSeq2SeqConfig, PMLMSeq2SeqTask

    _, data, _ = tiny_s2s(tmp_path_factory)
    args = hub.cfg.generation.copy()
    args.score_reference = True
    task = PMLMSeq2SeqTask.setup_task(PMLMSeq2SeqConfig(data=str(data), seed=1))
    task.load_dataset("test")
    ds = task.datasets["test"]
    need = ds.src_sizes + ds.tgt_sizes
    model = hub.models[0]
    monkeypatch.setattr(model, "max_positions", lambda: int(need.max()))
    task.build_generator(hub.models, args)  # the longest pair fits exactly
    monkeypatch.setattr(model, "max_positions", lambda: int(need.max()) - 1)
    i = int(need.argmax())
    with pytest.raises(BadInput, match=rf"^--score-reference: test pair {i}'s source \({ds.src_sizes[i]} positions "
                                       rf"with \[SOS\] and \[EOS\]\) and reference, kept whole \({ds.tgt_sizes[i]} "
                                       rf"tokens with EOS\), need {need[i]} positions, the model has {need[i] - 1} "
                                       rf"\(\d+ such pair\(s\)\): lower --max-source-positions to \d+$"):
        task.build_generator(hub.models, args)


def test_match_source_len_counts_the_source_text_as_for_a_translation_model_not_its_sos(hub):
    """fairseq's generator caps a hypothesis at src_lengths tokens and the EOS; a translation
    source is its text and EOS, ours also carries [SOS], which gave one token more. Text of n
    tokens: min_len n + 1 decodes exactly n + 1 tokens and the EOS; n + 2 exceeds the cap, and
    fairseq's own check refuses it (with [SOS] counted it decoded)."""
    source = hub.encode("the cat sat on the mat")
    n = int((source.ne(hub.src_dict.bos()) & source.ne(hub.src_dict.eos())).sum())
    hypo = hub.generate(source, beam=2, match_source_len=True, min_len=n + 1)[0]
    assert len(hypo["tokens"]) == n + 2 and hypo["tokens"][-1] == hub.src_dict.eos()
    with pytest.raises(AssertionError, match="min_len cannot be larger than max_len"):
        hub.generate(source, beam=2, match_source_len=True, min_len=n + 2)


def test_match_source_len_that_could_run_past_the_positions_is_refused_at_start(hub):
    """Source and target share the model's positions: a target as long as a source of up to
    --max-source-positions must fit after it. Before, decoding stopped at the first long source."""
    from fairseq_pmlm.errors import BadInput

    args = hub.cfg.generation.copy()
    args.match_source_len = True
    limit = hub.models[0].max_positions()
    kept = hub.task.cfg.max_source_positions
    try:
        hub.task.cfg.max_source_positions = limit // 2 + 1
        with pytest.raises(BadInput, match=rf"^--match-source-len allows targets as long as a source, up to "
                                           rf"{limit // 2} tokens .* lower --max-source-positions to {limit // 2}$"):
            hub.task.build_generator(hub.models, args)
        hub.task.cfg.max_source_positions = limit // 2
        hub.task.build_generator(hub.models, args)  # control: the last target's EOS at position limit - 1
    finally:
        hub.task.cfg.max_source_positions = kept
