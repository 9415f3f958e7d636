"""The streaming, parallel text -> data-bin engine of prepare_data.sh and s2s/prepare.sh:
byte-identical to the old route (tokeniser pieces -> fairseq-preprocess), whatever the workers
and parts; bounded memory; shards; and one-line errors with nothing left behind."""
import filecmp
import os
import signal
import subprocess
import sys
import time

import pytest
import sentencepiece as spm

from fairseq_pmlm.data.databin import reading
from fairseq_pmlm.data.databin.cli import main as text_to_databin
from fairseq_pmlm.symbols import SENTENCE_SEP

from cli import binarize
from helpers import no_room_for, stdlib_docstrings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ["dict.txt", "train.bin", "train.idx", "valid.bin", "valid.idx"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Real text: stdlib docstrings, one sentence a line, a blank line between modules, plus
    the hard cases (CRLF ends, tabs, non-ASCII, whitespace-only lines)."""
    tmp = tmp_path_factory.mktemp("corpus")
    _, sentences = stdlib_docstrings(["json/__init__", "argparse", "textwrap", "csv", "string", "shlex"])
    extra = ["Ünïcödé façade — naïve café 東京", "\t tabs\tand  spaces ", "   ", "crlf line"]
    text = "\n".join(sentences[:600] + extra + sentences[600:]) + "\n"
    (tmp / "train.txt").write_bytes(text.replace("crlf line\n", "crlf line\r\n").encode())
    (tmp / "valid.txt").write_text("\n".join(sentences[:50]) + "\n")
    spm.SentencePieceTrainer.train(input=str(tmp / "train.txt"), model_prefix=str(tmp / "spm"), vocab_size=600,
                                   model_type="bpe", character_coverage=1.0, minloglevel=2)
    return tmp


@pytest.fixture(scope="module")
def minilm_vocab(tmp_path_factory):
    """The vocab.txt of the pinned released model (its tokenizer.json's WordPiece vocabulary)."""
    from fairseq_pmlm.text.vocab import read_vocab
    from fairseq_pmlm.weights import released

    tmp = tmp_path_factory.mktemp("minilm")
    hf = released.unpack("all-minilm-l6-v2", str(tmp / "hf"))
    (tmp / "vocab.txt").write_text("".join(t + "\n" for t in read_vocab(os.path.join(hf, "tokenizer.json"))))
    return str(tmp / "vocab.txt")


def prepare(out, *args, workers=1, force=False):
    argv = ["--out", str(out), "--workers", str(workers)] + (["--force"] if force else []) + list(map(str, args))
    return text_to_databin(argv)


def reference_pieces(corpus, tmp, encode):
    """The old route: each line (universal newlines, stripped) -> pieces -> fairseq-preprocess."""
    for name in ("train", "valid"):
        with open(corpus / f"{name}.txt", encoding="utf-8", newline=None) as f:
            lines = [line.rstrip("\n") for line in f]
        (tmp / f"{name}.pieces").write_text("".join(encode(line) + "\n" for line in lines))


def same_files(a, b, names=FILES):
    """Names of the files that differ; a sentencepiece dictionary made here is fairseq-preprocess's
    plus its reserved row for the sentence separator (count 0, so after every piece of the text)."""
    differ = [n for n in names if n != "dict.txt" and not filecmp.cmp(a / n, b / n, shallow=False)]
    if "dict.txt" in names:
        ref, out = ((d / "dict.txt").read_text().splitlines() for d in (a, b))
        if f"{SENTENCE_SEP} 0" in out and f"{SENTENCE_SEP} 0" not in ref:
            ref = [line for line in ref if not line.startswith("madeupword")] + [f"{SENTENCE_SEP} 0"]
            out = [line for line in out if not line.startswith("madeupword")]
        differ += ["dict.txt"] if ref != out else []
    return differ


def test_sentencepiece_output_is_byte_identical_to_fairseq_preprocess_for_1_and_2_workers(
        corpus, tmp_path, monkeypatch):
    sp = spm.SentencePieceProcessor(model_file=str(corpus / "spm.model"))
    reference_pieces(corpus, tmp_path, lambda line: " ".join(sp.encode(line.strip(), out_type=str)))
    ref = binarize(tmp_path / "train.pieces", tmp_path / "valid.pieces", tmp_path / "ref", in_process=True)
    monkeypatch.setattr(reading, "MIN_PART_BYTES", 4096)  # many parts, so the order of parts matters
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        assert prepare(out, "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                       "--spm-model", corpus / "spm.model", workers=workers) == 0
        assert same_files(ref, out) == []


def test_wordpiece_output_is_byte_identical_to_fairseq_preprocess(corpus, minilm_vocab, tmp_path, monkeypatch):
    from fairseq_pmlm.text.wordpiece import WordPieceEncoder

    enc = WordPieceEncoder(minilm_vocab)
    reference_pieces(corpus, tmp_path, lambda line: enc.encode_lines([line])[0])
    (tmp_path / "wp.dict.txt").write_text(enc.mapping.dict_txt())
    ref = binarize(tmp_path / "train.pieces", tmp_path / "valid.pieces", tmp_path / "ref",
                   srcdict=tmp_path / "wp.dict.txt", in_process=True)
    monkeypatch.setattr(reading, "MIN_PART_BYTES", 4096)
    out = tmp_path / "out"
    assert prepare(out, "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                   "--wordpiece-vocab", minilm_vocab, workers=2) == 0
    assert same_files(ref, out) == []


def test_a_dictionary_trained_here_matches_fairseq_preprocess_on_the_same_pieces(corpus, tmp_path):
    out = tmp_path / "out"
    assert prepare(out, "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                   "--vocab-size", "600") == 0
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    reference_pieces(corpus, tmp_path, lambda line: " ".join(sp.encode(line.strip(), out_type=str)))
    ref = binarize(tmp_path / "train.pieces", tmp_path / "valid.pieces", tmp_path / "ref", in_process=True)
    assert same_files(ref, out) == []


def test_lines_end_at_newline_only_so_a_stray_carriage_return_never_shifts_pairs(corpus, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    pre = tmp_path / "pre"
    assert prepare(pre, "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                   "--spm-model", corpus / "spm.model") == 0
    words = "the file name list type path value string object data".split()  # in the model's pieces
    src = [f"source {words[i % 10]} {words[i // 10]} here" for i in range(30)]
    tgt = [f"target {words[i // 10]} {words[i % 10]}" for i in range(30)]
    src[5] = "a stray\rcarriage return"  # Python's universal newlines would make this two lines
    tgt[20] = "another\rone"
    for split in ("train", "valid", "test"):
        (raw / f"{split}.source").write_bytes(("\n".join(src) + "\n").encode())
        (raw / f"{split}.target").write_bytes(("\r\n".join(tgt) + "\r\n").encode())  # CRLF: the \r is dropped
    assert prepare(tmp_path / "pairs", "pairs", "--raw", raw, "--pretrain-data", pre) == 0
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(pre / "dict.txt"))
    sp = spm.SentencePieceProcessor(model_file=str(pre / "spm.model"))
    for side, lines in (("source", src), ("target", tgt)):
        ds = data_utils.load_indexed_dataset(str(tmp_path / "pairs" / f"test.source-target.{side}"), d)
        assert len(ds) == 30
        decoded = [sp.decode([d[int(i)] for i in ds[k][:-1]]) for k in range(30)]
        assert decoded == [line.replace("\r", " ") for line in lines]
        del ds


@pytest.mark.parametrize("files", [1, 3])
def test_shards_cut_at_document_boundaries_share_one_dictionary_and_add_up_to_the_whole(corpus, tmp_path, files):
    """One training file, or three (read as one stream, cut inside files where the sizes say)."""
    text = (corpus / "train.txt").read_bytes()
    docs = text.split(b"\n\n")
    train = []
    for i in range(files):  # the documents dealt out in order over the files
        train.append(tmp_path / f"part{i}.txt")
        train[-1].write_bytes(b"\n\n".join(docs[i * len(docs) // files:(i + 1) * len(docs) // files]) + b"\n")
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    (tmp_path / "all.txt").write_bytes(b"\n".join(p.read_bytes() for p in train))  # a blank line between files
    args = ["--valid", corpus / "valid.txt", "--spm-model", corpus / "spm.model"]
    assert prepare(whole, "corpus", "--train", tmp_path / "all.txt", *args) == 0
    assert prepare(sharded, "corpus", "--train", *train, *args, "--shards", "3", workers=2) == 0
    from fairseq.data import data_utils

    shards = [sharded / f"shard{k}" for k in range(3)]
    assert sorted(os.listdir(sharded)) == ["shard0", "shard1", "shard2"]
    assert all(filecmp.cmp(s / "dict.txt", whole / "dict.txt", shallow=False) for s in shards)
    assert os.path.isfile(shards[0] / "valid.idx") and not os.path.exists(shards[1] / "valid.idx")
    def items_of(prefix):
        ds = data_utils.load_indexed_dataset(str(prefix), None)
        out = [ds[i].tolist() for i in range(len(ds))]
        del ds
        return out

    expected = items_of(whole / "train")
    text_lines = [x for x in expected if x != [2]]
    starts_document = [i == 0 or expected[i - 1] == [2] for i, x in enumerate(expected) if x != [2]]
    got, first_of_shard = [], []
    for s in shards:
        shard_lines = [x for x in items_of(s / "train") if x != [2]]
        assert len(shard_lines) > 10
        first_of_shard.append(len(got))
        got += shard_lines
    assert got == text_lines  # every line once, in order
    assert all(starts_document[i] for i in first_of_shard)  # no document is split between shards


def test_each_training_file_ends_a_document_so_the_next_files_first_is_never_merged_into_it(corpus, tmp_path):
    """--train a.txt,b.txt: files that do not end with a blank line gave the last document of one
    and the first of the next a single document (with --shards cut there, two): now as if a blank
    line stood between the files, whatever --shards."""
    docs = (corpus / "train.txt").read_bytes().split(b"\n\n")
    train = []
    for i in range(3):
        train.append(tmp_path / f"part{i}.txt")
        train[-1].write_bytes(b"\n\n".join(docs[i * len(docs) // 3:(i + 1) * len(docs) // 3]) + b"\n")
    train[2].write_bytes(train[2].read_bytes() + b"\n")  # one that ends with a blank line: no second one
    (tmp_path / "all.txt").write_bytes(b"\n".join(p.read_bytes() for p in train))
    args = ["--valid", corpus / "valid.txt", "--spm-model", corpus / "spm.model"]
    assert prepare(tmp_path / "whole", "corpus", "--train", tmp_path / "all.txt", *args) == 0
    assert prepare(tmp_path / "files", "corpus", "--train", *train, *args, workers=2) == 0
    assert same_files(tmp_path / "whole", tmp_path / "files") == []


@pytest.mark.parametrize("dictionary", ["made here", "given without the row"])
def test_a_separator_spelled_out_in_pretraining_text_is_said_with_what_it_becomes(corpus, tmp_path, capsys,
                                                                                   dictionary):
    """"[X_SEP]" in pre-training text is one token, the separator row fine-tuning's summaries use
    (or <unk> in a dictionary without one): the pairs route said so, pre-training text changed silently."""
    train = tmp_path / "train.txt"
    train.write_text((corpus / "train.txt").read_text() + "\nFirst sentence. [X_SEP] Second one. [X_SEP] Third.\n")
    args = ["corpus", "--train", train, "--valid", corpus / "valid.txt", "--spm-model", corpus / "spm.model"]
    if dictionary != "made here":
        assert prepare(tmp_path / "first", *args) == 0
        rows = (tmp_path / "first" / "dict.txt").read_text().splitlines()
        (tmp_path / "dict.txt").write_text("".join(r + "\n" for r in rows if not r.startswith(SENTENCE_SEP)))
        args += ["--srcdict", tmp_path / "dict.txt"]
    capsys.readouterr()
    assert prepare(tmp_path / "out", *args) == 0
    out = capsys.readouterr().out
    if dictionary == "made here":
        assert f"sentence separator {SENTENCE_SEP}: 2 in the text (the --train/--valid text), one token each " \
               "(its own row)" in out, out
    else:
        assert f"note: the --train/--valid text holds {SENTENCE_SEP} (2 in the text) but {tmp_path / 'dict.txt'} " \
               "has no row for it" in out, out


@pytest.mark.parametrize("split", ["train", "valid"])
def test_text_without_a_token_is_refused_naming_the_file_not_the_shards(corpus, tmp_path, capsys, split):
    """Lines of only zero-width spaces and tabs pass the blank-line check but hold no token: the
    training text was refused as "use fewer --shards than 1", the validation text was written (and
    fairseq-train stopped on it later)."""
    empty = tmp_path / "no_tokens.txt"
    empty.write_text("\u200b\n\t\u200b\n\n\u200b \n")
    files = {"train": corpus / "train.txt", "valid": corpus / "valid.txt", split: empty}
    rc = prepare(tmp_path / "out", "corpus", "--train", files["train"], "--valid", files["valid"],
                 "--spm-model", corpus / "spm.model")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.endswith(f"has no token (only blank lines, whitespace or characters the tokeniser "
                                    f"drops): {empty}"), err
    assert "--shards" not in err and os.listdir(tmp_path) == ["no_tokens.txt"]


@pytest.mark.parametrize("case", ["mask-row", "duplicate", "pairs"])
def test_a_bad_dictionary_is_refused_before_any_text_is_tokenised_naming_it(corpus, tmp_path, capsys,
                                                                           monkeypatch, case):
    """fairseq-preprocess reads --srcdict first; the engine read it after tokenising all the text
    (hours on a large corpus), and a row [MASK] was reported as "dict.txt already holds [MASK]"."""
    from fairseq_pmlm.data.databin import prepare as prepare_mod

    pre = tmp_path / "pre"
    assert prepare(pre, "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                   "--spm-model", corpus / "spm.model") == 0
    rows = (pre / "dict.txt").read_text().splitlines()
    bad = tmp_path / "bad.dict.txt"
    bad.write_text("\n".join(rows + (["[MASK] 1"] if case == "mask-row" else [rows[5]])) + "\n")

    def no_encoding(*args, **kwargs):
        raise AssertionError("text tokenised before the dictionary was checked")

    monkeypatch.setattr(prepare_mod.Preparer, "encode", no_encoding)
    capsys.readouterr()
    if case == "pairs":
        raw = tmp_path / "raw"
        raw.mkdir()
        for split in ("train", "valid", "test"):
            (raw / f"{split}.source").write_text("a source line\n")
            (raw / f"{split}.target").write_text("a target\n")
        os.replace(bad, pre / "dict.txt")
        bad = pre / "dict.txt"
        rc = prepare(tmp_path / "out", "pairs", "--raw", raw, "--pretrain-data", pre)
    else:
        rc = prepare(tmp_path / "out", "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                     "--spm-model", corpus / "spm.model", "--srcdict", bad)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and f"{bad}" in err, err
    assert "[MASK]" in err if case == "mask-row" else "Duplicate word" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["spm-model-is-text", "vocab-is-binary", "vocab-without-specials"])
def test_a_tokenizer_file_that_cannot_be_read_is_one_line_naming_it(corpus, tmp_path, capsys, case):
    """A text file given as --spm-model, a sentencepiece model or a word list as --wordpiece-vocab:
    a Python traceback (exit status 1) from sentencepiece or the vocab reader."""
    if case == "spm-model-is-text":
        path, tok = corpus / "valid.txt", "--spm-model"
    else:
        path, tok = (corpus / "spm.model", "--wordpiece-vocab") if case == "vocab-is-binary" else \
            (tmp_path / "words.txt", "--wordpiece-vocab")
        if case == "vocab-without-specials":
            path.write_text("the\nof\nand\n")
    rc = prepare(tmp_path / "out", "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                 tok, path)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and f"error: {path}: not a usable" in err, err
    assert not (tmp_path / "out").exists() and no_leftovers(tmp_path) == []


@pytest.mark.parametrize("listed", ["{t},,{t}", ",{t}"])
def test_an_empty_name_in_the_train_list_is_refused_naming_the_flag(corpus, tmp_path, listed):
    """prepare_data.sh --train a.txt,,b.txt said "file not found: " (an empty name, no flag)."""
    from cli import recipe

    train = listed.format(t=corpus / "train.txt")
    proc = recipe("prepare_data.sh", "--train", train, "--valid", corpus / "valid.txt", "--name", "x",
                  "--destdir", tmp_path, "--spm-model", corpus / "spm.model", check=False)
    assert proc.returncode != 0 and proc.stderr.strip() == (
        f"prepare_data.sh: error: --train lists an empty file name (two commas, or one first): {train}"), proc.stderr
    assert os.listdir(tmp_path) == []


def test_memory_stays_bounded_as_the_input_grows(corpus, tmp_path):
    """Peak RSS of one worker for ~1 MB and ~8 MB of text: the same within a few MB (the whole
    input held in memory, as the old tokenisers did, would add 8.5x the input)."""
    text = (corpus / "train.txt").read_bytes()
    text *= -(-2**20 // len(text))
    peaks = []
    for copies in (1, 8):
        (tmp_path / f"t{copies}.txt").write_bytes(text * copies)
        code = ("import resource, sys; from fairseq_pmlm.data.databin.cli import main; "
                "rc = main(sys.argv[1:]); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")
        proc = subprocess.run([sys.executable, "-c", code, "--out", str(tmp_path / f"o{copies}"), "corpus",
                               "--train", str(tmp_path / f"t{copies}.txt"), "--valid", str(corpus / "valid.txt"),
                               "--spm-model", str(corpus / "spm.model")], capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        peaks.append(int(proc.stdout.split()[-1]) / 1024)  # ru_maxrss is in KB on Linux
    assert len(text) * 7 > 5 * 2**20  # the larger input is > 5 MB more than the smaller
    assert peaks[1] - peaks[0] < 8, peaks  # MB


def no_leftovers(parent):
    return [n for n in os.listdir(parent) if n.startswith(".")]


@pytest.mark.parametrize("case", ["non-utf8", "vocab-too-large", "empty-valid", "exists", "holds-input"])
def test_bad_input_is_one_line_naming_the_file_and_nothing_is_written(corpus, tmp_path, capsys, case):
    train, valid = corpus / "train.txt", corpus / "valid.txt"
    out = tmp_path / "out"
    tok = ["--spm-model", corpus / "spm.model"]
    if case == "non-utf8":
        train = tmp_path / "bad.txt"
        train.write_bytes(b"good line\n\nanother good line\nbad \xff byte here\n")
        expect = f"{train}:4: not UTF-8 text (byte 0xff at column 5)"
    elif case == "vocab-too-large":
        tok = ["--vocab-size", "90000"]
        expect = "--vocab-size 90000 is too large for"
    elif case == "empty-valid":
        valid = tmp_path / "empty.txt"
        valid.write_text("\n\n")
        expect = f"validation file has no text (only blank lines or empty): {valid}"
    elif case == "exists":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
        expect = f"{out} exists: pass --force to replace it"
    else:  # --force, but the output directory holds the training text: it would be deleted
        out.mkdir()
        train = out / "train.txt"
        train.write_bytes((corpus / "train.txt").read_bytes())
        expect = f"the output {out} holds the input {train}"
    rc = prepare(out, "corpus", "--train", train, "--valid", valid, *tok, force=case == "holds-input")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and expect in err, err
    assert no_leftovers(tmp_path) == []
    if case in ("exists", "holds-input"):
        assert sorted(os.listdir(out)) == ["keep.txt" if case == "exists" else "train.txt"]
    else:
        assert not out.exists()


@pytest.mark.parametrize("name", ["spm.model", ".ids", "train.bin", "valid.idx"])
def test_a_full_disk_at_any_write_is_one_line_naming_the_output_and_leaves_nothing(corpus, tmp_path, capsys,
                                                                                    monkeypatch, name):
    """sentencepiece's own writer left a cut model and the next step failed in a traceback ("could
    not parse ModelProto"); a part file's write named the hidden staging directory."""
    no_room_for(name, monkeypatch)
    try:
        rc = prepare(tmp_path / "out", "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                     "--vocab-size", "300")
    finally:
        monkeypatch.undo()
    err = capsys.readouterr().err
    shown = tmp_path / "out" / name if name.endswith((".bin", ".idx")) else tmp_path / "out"
    assert rc == 2 and err == f"text_to_databin: error: {shown}: cannot write it: No space left on device\n", err
    assert os.listdir(tmp_path) == []


def test_force_replaces_an_old_output_whole(corpus, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.bin").write_text("old")
    assert prepare(out, "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                   "--spm-model", corpus / "spm.model", force=True) == 0
    assert sorted(os.listdir(out)) == sorted(FILES + ["spm.model"])
    assert no_leftovers(tmp_path) == []


@pytest.mark.parametrize("tokenizer", ["sentencepiece-trained-here", "wordpiece"])
def test_a_destination_two_levels_deep_that_does_not_exist_is_created(corpus, tmp_path, request, tokenizer):
    """Both tokeniser paths: training sentencepiece puts its temp dir beside the output too."""
    tok = (["--vocab-size", "600"] if tokenizer != "wordpiece"
           else ["--wordpiece-vocab", request.getfixturevalue("minilm_vocab")])
    out = tmp_path / "new" / "deeper" / "name"
    assert prepare(out, "corpus", "--train", corpus / "valid.txt", "--valid", corpus / "valid.txt", *tok) == 0
    assert {"dict.txt", "train.bin", "valid.idx"} <= set(os.listdir(out))
    assert os.listdir(tmp_path / "new" / "deeper") == ["name"]  # no temp dir left beside it


def test_a_run_stopped_before_its_output_leaves_no_directory_it_made_on_the_way(corpus, tmp_path, capsys):
    """--out new/deeper/name: a run that stopped (here: text without a token, found after the output
    was opened) removed its staging directory but left new/deeper/ behind, empty."""
    (tmp_path / "no_tokens.txt").write_text("\u200b\n")
    (tmp_path / "kept").mkdir()
    for out in (tmp_path / "new" / "deeper" / "name", tmp_path / "kept" / "new" / "name"):
        rc = prepare(out, "corpus", "--train", tmp_path / "no_tokens.txt", "--valid", corpus / "valid.txt",
                     "--spm-model", corpus / "spm.model")
        assert rc == 2 and "has no token" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["kept", "no_tokens.txt"]  # a directory that was there stays
    assert os.listdir(tmp_path / "kept") == []


def test_sigterm_removes_the_temporary_directory_and_writes_nothing(corpus, tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes((corpus / "train.txt").read_bytes() * 1500)  # ~35 MB: ~10 s of work
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "scripts", "text_to_databin.py"),
                             "--prog", "prepare_data.sh", "--out", str(tmp_path / "out"), "--workers", "2",
                             "corpus", "--train", str(big),
                             "--valid", str(corpus / "valid.txt"), "--spm-model", str(corpus / "spm.model")],
                            cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not any(  # wait for the first part file in its temp dir
            n.startswith("part") for d in no_leftovers(tmp_path) for n in os.listdir(tmp_path / d)):
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted: nothing written" in err
    assert no_leftovers(tmp_path) == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("instant", ["the staging directory is made", "the tokeniser loads"])
def test_a_sigterm_the_instant_the_staging_directory_exists_leaves_no_directory(corpus, tmp_path, monkeypatch,
                                                                                instant):
    """A group SIGTERM in the first second of prepare_data.sh left an empty .NAME.XXXXXXXX behind:
    the directory was made before the code that removes it was in place."""
    import tempfile

    from fairseq_pmlm.data.databin import prepare as prepare_module

    def signalled(real):
        def call(*args, **kwargs):
            made = real(*args, **kwargs)  # the signal right after: made, not yet in anyone's hands
            os.kill(os.getpid(), signal.SIGTERM)
            return made
        return call

    if instant == "the staging directory is made":
        monkeypatch.setattr(tempfile, "mkdtemp", signalled(tempfile.mkdtemp))
    else:
        monkeypatch.setattr(prepare_module, "make_tokenizer", signalled(prepare_module.make_tokenizer))
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        rc = prepare(tmp_path / "out", "corpus", "--train", corpus / "valid.txt", "--valid", corpus / "valid.txt",
                     "--spm-model", corpus / "spm.model")
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
    assert rc == 130
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mode", ["corpus", "pairs"])
def test_sigterm_to_the_process_group_at_any_instant_stops_at_once_and_removes_the_temporary_directory(
        corpus, tmp_path, mode):
    """What a job scheduler does: SIGTERM to the command and its workers together. Kills while
    the workers tokenise and while they wait for work (between the inputs; while the dictionary
    is built) once hung on a lock a killed worker held."""
    big = tmp_path / "big.txt"
    # ~68 MB: ~4 s of work at 16 MB/s (2 fast cores), so that the latest signal still finds the run
    # at work, not in the process's exit (where the default SIGTERM ends it, the output whole)
    big.write_bytes((corpus / "train.txt").read_bytes() * 3000)
    if mode == "corpus":
        args = ["corpus", "--train", big, "--valid", corpus / "valid.txt", "--spm-model", corpus / "spm.model"]
    else:
        assert prepare(tmp_path / "pre", "corpus", "--train", corpus / "valid.txt", "--valid", corpus / "valid.txt",
                       "--spm-model", corpus / "spm.model") == 0
        (tmp_path / "raw").mkdir()
        for split in ("train", "valid", "test"):  # the workers tokenise train, the main process the rest
            for side in ("source", "target"):
                os.link(big if split == "train" else corpus / "valid.txt", tmp_path / "raw" / f"{split}.{side}")
        args = ["pairs", "--raw", tmp_path / "raw", "--pretrain-data", tmp_path / "pre"]
    dest = tmp_path / "dest"
    dest.mkdir()
    for delay in (0.0, 0.5, 1.2, 2.5) if mode == "corpus" else (0.3, 2.5):  # seconds after the first part file
        proc = subprocess.Popen([sys.executable, os.path.join(REPO, "scripts", "text_to_databin.py"),
                                 "--prog", "prepare_data.sh", "--out", str(dest / "out"), "--workers", "2",
                                 *map(str, args)], cwd=REPO, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline and not any(
                n.startswith("part") for d in no_leftovers(dest) for n in os.listdir(dest / d)):
            time.sleep(0.02)
        time.sleep(delay)
        assert proc.poll() is None, f"the run ended before it could be interrupted ({delay} s)"
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)  # a second, on a machine that is not busy
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"SIGTERM {delay} s after the first part file: still running 30 s later")
        assert proc.returncode == 130 and "interrupted: nothing written" in err, (delay, err)
        assert os.listdir(dest) == [], delay


def test_wordpiece_case_auto_reads_the_tokenizer_config_beside_the_vocab_as_the_hub_does(corpus, minilm_vocab,
                                                                                       tmp_path, capsys):
    """A vocab whose tokenizer_config.json says do_lower_case false was tokenised lower-cased (the
    vocab has no capitals), where s2s/prepare.sh and the hub read it cased."""
    import shutil

    (tmp_path / "vocab").mkdir()
    shutil.copy(minilm_vocab, tmp_path / "vocab" / "vocab.txt")
    (tmp_path / "vocab" / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    args = ["--train", corpus / "valid.txt", "--valid", corpus / "valid.txt", "--wordpiece-vocab"]
    assert prepare(tmp_path / "auto", "corpus", *args, tmp_path / "vocab" / "vocab.txt") == 0
    for case in ("cased", "uncased"):
        assert prepare(tmp_path / case, "corpus", *args, minilm_vocab, "--wordpiece-case", case) == 0
    assert same_files(tmp_path / "auto", tmp_path / "cased") == []
    assert same_files(tmp_path / "auto", tmp_path / "uncased") != []
    (tmp_path / "vocab" / "tokenizer_config.json").write_text("{not json")
    capsys.readouterr()
    assert prepare(tmp_path / "bad", "corpus", *args, tmp_path / "vocab" / "vocab.txt") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--wordpiece-case auto: {tmp_path / 'vocab' / 'tokenizer_config.json'}: " \
        "cannot read do_lower_case" in err, err
    assert not (tmp_path / "bad").exists()


def test_a_ten_megabyte_line_without_spaces_is_one_unknown_wordpiece(tmp_path, minilm_vocab, corpus):
    """BERT's tokenizer maps a word of over 100 characters to [UNK]; sentencepiece keeps its pieces
    and pre-training cuts such a line into pieces of --tokens-per-sample."""
    (tmp_path / "long.txt").write_text("first line here\n\n" + "a" * 10_000_000 + "\nlast line\n")
    assert prepare(tmp_path / "out", "corpus", "--train", tmp_path / "long.txt", "--valid", corpus / "valid.txt",
                   "--wordpiece-vocab", minilm_vocab) == 0
    from fairseq.data import data_utils

    ds = data_utils.load_indexed_dataset(str(tmp_path / "out" / "train"), None)
    assert ds.sizes.tolist() == [4, 1, 2, 3] and ds[2].tolist() == [3, 2]  # <unk> </s>
    del ds


@pytest.mark.parametrize("case", ["missing-test", "line-counts", "empty-valid", "name-is-pretrain-data"])
def test_pairs_that_cannot_be_used_are_refused_when_prepared(corpus, tmp_path, capsys, case):
    pre = tmp_path / "pre"
    assert prepare(pre, "corpus", "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                   "--spm-model", corpus / "spm.model") == 0
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        (raw / f"{split}.source").write_text("a source line\nanother one\n")
        (raw / f"{split}.target").write_text("a target\nanother\n")
    out, force = tmp_path / "pairs", False
    if case == "missing-test":
        os.remove(raw / "test.source")
        os.remove(raw / "test.target")
        expect = f"no test split: {raw / 'test.source'} and {raw / 'test.target'} are missing"
    elif case == "line-counts":
        (raw / "valid.target").write_text("one\rline\r\n")  # a lone \r does not split a line
        expect = f"{raw / 'valid.source'} has 2 lines but {raw / 'valid.target'} has 1"
    elif case == "empty-valid":
        (raw / "valid.source").write_text("\n\n")
        (raw / "valid.target").write_text("\n\n")
        expect = "hold no example"
    else:  # --name equal to the --pretrain-data directory, with --force: it would delete the dictionary
        out, force = pre, True
        expect = f"the output {pre} holds the input"
    capsys.readouterr()
    rc = prepare(out, "pairs", "--raw", raw, "--pretrain-data", pre, force=force)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and expect in err, err
    assert sorted(os.listdir(tmp_path)) == (["pre", "raw"]) and os.path.isfile(pre / "dict.txt")


def test_a_command_run_in_process_gives_the_callers_signal_handlers_back(tmp_path, corpus):
    """The commands handle SIGTERM as Ctrl-C while they run; called in a process that goes on (a
    test, a library), they leave its handlers as they were: an ignored SIGTERM or SIGINT would be
    inherited by every process it starts afterwards (a recipe could then not be stopped)."""
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    assert prepare(tmp_path / "out", "corpus", "--train", corpus / "valid.txt", "--valid", corpus / "valid.txt",
                   "--spm-model", corpus / "spm.model") == 0
    assert {s: signal.getsignal(s) for s in before} == before
