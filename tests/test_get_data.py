"""scripts/s2s/get_data.py (fairseq_pmlm/public_data/cnndm_xsum.py): CNN/DailyMail and XSum from
each public form (made-up articles, tests/summary_fixtures.py) to the same raw files; sentence
boundaries kept as [X_SEP]; streamed reading; bad input as one line, exit status 2 and nothing
written."""
import os
import re
import signal
import stat
import subprocess
import sys

import pytest

from fairseq_pmlm.public_data import cnndm_xsum, cnndm_xsum_readers

import summary_fixtures as F
from cli import run_main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GET_DATA = os.path.join(REPO, "scripts", "s2s", "get_data.py")


def get_data(*args):
    """get_data.py ARGS, in this process (the script is ``sys.exit(main())``; test_the_script_runs_as_a_command
    runs it as one)."""
    return run_main(cnndm_xsum.main, *args)


def hidden(parent):
    """What a run may leave beside its output by mistake: staging directories."""
    return [n for n in os.listdir(parent) if n.startswith(".")]


def run_ok(dataset, src, out):
    proc = get_data(dataset, "--from", src, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def cnndm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cnndm")
    data = F.articles()
    run_ok("cnndm", F.write_stories(tmp / "stories", data), tmp / "raw")
    return tmp, data, F.raw_files(tmp / "raw")


@pytest.mark.parametrize("form", ["parquet", "jsonl", "save_to_disk", "s2s-ft", "s2s-ft-gold"])
def test_every_public_form_of_cnndm_gives_the_raw_files_of_the_story_files(cnndm, form):
    tmp, data, from_stories = cnndm
    if form.startswith("s2s-ft"):
        src = F.write_s2sft(tmp / form, data, test_gold=form.endswith("gold"))
    else:
        src = F.write_hf(tmp / form, data, "cnndm", form)
    run_ok("cnndm", src, tmp / f"raw-{form}")
    assert F.raw_files(tmp / f"raw-{form}") == from_stories


def with_bom(root, suffixes):
    """Every file under ``root`` ending in one of ``suffixes`` starting with a UTF-8 byte order mark."""
    for d, _, names in os.walk(root):
        for name in names:
            if name.endswith(suffixes):
                path = os.path.join(d, name)
                with open(path, "rb") as f:
                    data = f.read()
                with open(path, "wb") as f:
                    f.write(b"\xef\xbb\xbf" + data)
    return root


@pytest.mark.parametrize("form", ["jsonl", "s2s-ft", "s2s-ft-gold", "stories"])
def test_a_utf8_byte_order_mark_is_read_in_every_text_form(cnndm, tmp_path, form):
    """train.jsonl with one was dropped ("no train split"), s2s-ft's JSON "not a form", and stories
    converted with U+FEFF at the start of their sources."""
    tmp, data, from_stories = cnndm
    if form == "stories":
        src = F.write_stories(tmp_path / form, data)
    elif form.startswith("s2s-ft"):
        src = F.write_s2sft(tmp_path / form, data, test_gold=form.endswith("gold"))
    else:
        src = F.write_hf(tmp_path / form, data, "cnndm", form)
    run_ok("cnndm", with_bom(src, (".jsonl", ".json", ".target", ".story", ".txt")), tmp_path / "raw")
    assert F.raw_files(tmp_path / "raw") == from_stories


def test_dictionary_encoded_parquet_text_columns_are_read_as_text(cnndm, tmp_path):
    """Refused as "not text" before: a column whose rows are indices into a table of strings."""
    import pyarrow.parquet as pq

    tmp, data, from_stories = cnndm
    src = F.write_hf(tmp_path / "parquet", data, "cnndm", "parquet")
    for split in os.listdir(src):
        path = src / split / "0000.parquet"
        table = pq.read_table(path)
        for name in ("article", "highlights"):
            table = table.set_column(table.schema.get_field_index(name), name, table.column(name).dictionary_encode())
        pq.write_table(table, path, row_group_size=3)
        assert str(pq.read_schema(path).field("article").type).startswith("dictionary<")
    run_ok("cnndm", src, tmp_path / "raw")
    assert F.raw_files(tmp_path / "raw") == from_stories


def test_cnndm_targets_keep_each_highlight_as_a_sentence_between_separators(cnndm):
    tmp, data, raw = cnndm
    from fairseq_pmlm.scoring.summaries import parse_sentence_blocks

    targets = raw["test.target"].decode().splitlines()
    highlights = [h for _, _, h in data["test"]]
    assert targets == [" [X_SEP] ".join(h) for h in highlights]
    blocks = parse_sentence_blocks(raw["test.target.sentences"].decode().split("\n")[:-1])
    assert blocks == highlights  # one sentence a line, a blank line after each example
    sources = raw["train.source"].decode().splitlines()
    assert len(sources) == len(data["train"]) and all("\n" not in s and s for s in sources)
    body = data["train"][0][1]
    assert sources[0].startswith(f"{body[0]} {body[1]} . {body[2]}")  # the caption line got its period


def test_xsum_from_parquet_json_lines_and_save_to_disk_is_the_same_one_sentence_targets(tmp_path):
    data = F.articles(seed=1)
    outs = []
    for form in ("parquet", "jsonl", "save_to_disk"):
        run_ok("xsum", F.write_hf(tmp_path / form, data, "xsum", form), tmp_path / f"raw-{form}")
        outs.append(F.raw_files(tmp_path / f"raw-{form}"))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0]["valid.target"].decode().splitlines() == [h[0] for _, _, h in data["validation"]]
    assert b"[X_SEP]" not in outs[0]["train.target"]
    assert b"\n" not in outs[0]["train.source"].split(b"\n", 1)[0]  # the document's lines joined


def test_s2sft_wordpiece_token_lists_are_joined_and_keep_their_sentence_boundaries(cnndm, tmp_path):
    _, data, _ = cnndm
    run_ok("cnndm", F.write_s2sft(tmp_path / "tok", data, tokenized=True), tmp_path / "raw")
    targets = (tmp_path / "raw" / "train.target").read_text().splitlines()
    assert [t.count("[X_SEP]") for t in targets] == [len(h) - 1 for _, _, h in data["train"]]
    assert "##" not in (tmp_path / "raw" / "train.source").read_text()
    assert targets[0].split(" [X_SEP] ")[0] == " ".join(F.wordpieces(data["train"][0][2][0])).replace(" ##", "")


def test_empty_examples_are_dropped_from_train_and_valid_counted_and_kept_in_test(tmp_path):
    data = F.articles()
    records = {s: list(F.hf_records("cnndm", rows)) for s, rows in data.items()}
    records["train"][3]["article"] = ""
    records["validation"][0]["highlights"] = " \n "
    records["test"][1]["article"] = ""
    (tmp_path / "src").mkdir()
    import json

    for split, rows in records.items():
        (tmp_path / "src" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_ok("cnndm", tmp_path / "src", tmp_path / "raw")
    assert "train: 23 examples (1 with an empty source or target dropped)" in proc.stdout
    assert "valid: 3 examples (1 with an empty source or target dropped)" in proc.stdout
    assert "test: 4 examples\n" in proc.stdout
    assert (tmp_path / "raw" / "test.source").read_text().splitlines()[1] == ""


def test_parquet_and_arrow_files_are_read_a_batch_of_rows_at_a_time(tmp_path, monkeypatch):
    """The full CNN/DailyMail train split is ~1.3 GB: never read whole."""
    monkeypatch.setattr(cnndm_xsum_readers, "BATCH_ROWS", 2)
    data = {"train": F.articles()["train"]}
    for form in ("parquet", "save_to_disk"):
        root = F.write_hf(tmp_path / form, data, "cnndm", form)
        path = next(os.path.join(d, n) for d, _, names in os.walk(root) for n in names
                    if n.endswith((".parquet", ".arrow")))
        kind = "parquet" if form == "parquet" else "arrow"
        sizes = [b.num_rows for b in cnndm_xsum_readers.arrow_batches(path, kind, ("article", "highlights"))]
        assert sum(sizes) == 24 and max(sizes) <= 3, sizes  # row groups / record batches of 2-3 rows
        assert [a for a, _ in cnndm_xsum_readers.hf_rows(path, kind, ("article", "highlights"))][:2] == \
            [r["article"] for r in F.hf_records("cnndm", data["train"])][:2]


def bad_source(case, src, data):
    """(the input of ``case``, the part of the message that names the problem)."""
    if case == "unknown format":
        src.mkdir()
        (src / "notes.csv").write_text("a,b\n")
        return src, f"{src / 'notes.csv'}: not a form get_data.py reads"
    if case == "story without highlights":
        import hashlib

        F.write_stories(src, data)
        story = src / "cnn" / "stories" / f"{hashlib.sha1(data['test'][2][0].encode()).hexdigest()}.story"
        story.write_text(story.read_text().split("@highlight")[0])
        return src, f"{story}: a .story file with no highlights"
    if case == "split list names a missing story":
        F.write_stories(src, data)
        lines = (src / "all_val.txt").read_text().splitlines()
        (src / "all_val.txt").write_text("\n".join(lines[:1] + ["http://www.example.com/gone.html"] + lines[1:]) + "\n")
        return src, f"{src / 'all_val.txt'}:2: http://www.example.com/gone.html -> "
    if case == "mismatched source and target counts":
        F.write_s2sft(src, data, test_gold=True)
        gold = (src / "test.target").read_text().splitlines()
        (src / "test.target").write_text("\n".join(gold[:-1]) + "\n")
        return src, f"{src / 'test.target'} has 3 lines but {src / 'test.json'} has more examples"
    if case == "not UTF-8":
        F.write_hf(src, data, "cnndm", "jsonl")
        with open(src / "validation.jsonl", "ab") as f:
            f.write(b'{"article": "caf\xe9", "highlights": "x", "id": "1"}\n')
        return src, f"{src / 'validation.jsonl'}:5: not UTF-8 text (byte 0xe9"
    if case == "a split missing":
        F.write_hf(src, data, "cnndm", "jsonl")
        os.remove(src / "test.jsonl")
        return src, "no test split among the files of the jsonl form"
    if case.endswith("column"):  # a column of bytes, numbers or structs where text belongs
        import pyarrow as pa
        import pyarrow.parquet as pq

        F.write_hf(src, data, "cnndm", "parquet")
        path = src / "train" / "0000.parquet"
        table = pq.read_table(path)
        column = {"bytes column": [a.encode() for a in table.column("article").to_pylist()],
                  "number column": list(range(table.num_rows)),
                  "struct column": [{"text": h} for h in table.column("highlights").to_pylist()]}[case]
        name = "highlights" if case == "struct column" else "article"
        pq.write_table(table.set_column(table.schema.get_field_index(name), name, pa.array(column)), path)
        kind = {"bytes column": "binary", "number column": "int64"}.get(case, "struct<text: string>")
        return src, f"{path}: the {name} column holds {kind}, not text"
    if case == "number in a JSON field":
        F.write_hf(src, data, "cnndm", "jsonl")
        with open(src / "validation.jsonl", "a") as f:
            f.write('{"article": "text", "highlights": 7, "id": "1"}\n')
        return src, f"{src / 'validation.jsonl'}:5: the highlights field holds int, not text"
    assert case == "xsum columns given as cnndm"
    F.write_hf(src, data, "xsum", "parquet")
    return src, "0000.parquet: no article / highlights column (it has document, summary, id"


@pytest.mark.parametrize("case", ["unknown format", "story without highlights", "split list names a missing story",
                                  "mismatched source and target counts", "not UTF-8", "a split missing",
                                  "xsum columns given as cnndm", "bytes column", "number column", "struct column",
                                  "number in a JSON field"])
def test_bad_input_is_one_line_exit_2_and_nothing_is_written(tmp_path, case):
    src, expect = bad_source(case, tmp_path / "src", F.articles())
    out = tmp_path / "raw" / "cnndm"
    proc = get_data("cnndm", "--from", src, "--out", out)
    assert proc.returncode == 2 and proc.stdout.count("\n") <= 1  # at most the "from ..." line
    assert proc.stderr.startswith("get_data.py: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert expect in proc.stderr, proc.stderr
    assert not out.exists() and (not (tmp_path / "raw").exists() or os.listdir(tmp_path / "raw") == [])


def test_force_replaces_only_a_directory_get_data_wrote_never_another_nor_the_current_one(cnndm, tmp_path,
                                                                                         monkeypatch):
    tmp, _, raw = cnndm
    out = tmp_path / "raw"
    out.mkdir()
    (out / "mine").write_text("x")
    proc = get_data("cnndm", "--from", tmp / "stories", "--out", out)
    assert proc.returncode == 2 and proc.stderr == f"get_data.py: error: {out} exists: pass --force to replace it\n"
    proc = get_data("cnndm", "--from", tmp / "stories", "--out", out, "--force")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{out} exists and is not an output of get_data.py" in proc.stderr
    monkeypatch.chdir(out)
    proc = get_data("cnndm", "--from", tmp / "stories", "--out", ".", "--force")
    assert proc.returncode == 2 and "the output . is or holds the current directory" in proc.stderr, proc.stderr
    assert os.listdir(out) == ["mine"]
    os.symlink(out, tmp_path / "link")
    proc = get_data("cnndm", "--from", tmp / "stories", "--out", tmp_path / "link", "--force")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "is a symbolic link (to " in proc.stderr
    assert os.listdir(out) == ["mine"]
    ours = tmp_path / "ours"
    run_ok("cnndm", tmp / "stories", ours)
    (ours / "stray").write_text("from before")
    assert get_data("cnndm", "--from", tmp / "stories", "--out", ours, "--force").returncode == 0
    assert F.raw_files(ours) == raw and hidden(tmp_path) == []


def test_an_output_inside_the_input_is_refused_and_only_the_files_of_the_form_are_read(cnndm, tmp_path):
    """A rerun into RAW inside PATH read RAW/train.target as the train split's references."""
    tmp, data, raw = cnndm
    src = F.write_s2sft(tmp_path / "s2sft", data)
    proc = get_data("cnndm", "--from", src, "--out", src / "raw")
    assert proc.returncode == 2 and "lies inside the input" in proc.stderr and not (src / "raw").exists()
    (src / "old").mkdir()  # a stray earlier output: its train.target lines are not the train pairs'
    (src / "old" / "train.target").write_text("".join(f"wrong {i}\n" for i in range(len(data["train"]))))
    run_ok("cnndm", src, tmp_path / "raw")
    assert F.raw_files(tmp_path / "raw") == raw


@pytest.mark.parametrize("instant", [("rename", 1), ("rename", 2), ("exchange", 1), ("rmtree", 1)],
                         ids=["moving the old output out", "moving the new one in", "exchanging them in one step",
                              "removing the old one"])
def test_an_interrupt_at_any_instant_of_the_swap_leaves_the_old_or_the_new_output_whole(tmp_path, monkeypatch,
                                                                                        instant):
    """--force over an earlier output, SIGTERM as a step of the swap begins (the old output was
    once deleted before the new one moved in: 144,142 of 150,000 files lost). The two renames are
    the swap where the filesystem cannot exchange two paths in one step."""
    import shutil

    from fairseq_pmlm.runtime import output_dir

    out = tmp_path / "raw"
    run_ok("cnndm", F.write_hf(tmp_path / "old", F.articles(seed=3), "cnndm", "jsonl"), out)
    old = F.raw_files(out)
    new_src = F.write_hf(tmp_path / "new", F.articles(seed=4), "cnndm", "jsonl")
    run_ok("cnndm", new_src, tmp_path / "expected")
    new = F.raw_files(tmp_path / "expected")
    calls = []

    def signalled(kind, real):
        def call(*args, **kwargs):
            calls.append(kind)
            if (kind, calls.count(kind)) == instant:
                os.kill(os.getpid(), signal.SIGTERM)
            return real(*args, **kwargs)
        return call

    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    exchange = output_dir._exchange if instant[0] != "rename" else (lambda a, b: False)
    monkeypatch.setattr(output_dir, "_exchange", signalled("exchange", exchange))
    monkeypatch.setattr(os, "rename", signalled("rename", os.rename))
    monkeypatch.setattr(shutil, "rmtree", signalled("rmtree", shutil.rmtree))
    try:
        rc = cnndm_xsum.main(["cnndm", "--from", str(new_src), "--out", str(out), "--force"])
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
        monkeypatch.undo()
    assert rc == 130 and instant in [(k, calls[:i + 1].count(k)) for i, k in enumerate(calls)]
    assert F.raw_files(out) in (old, new)
    assert hidden(tmp_path) == []


KILLED_RUN = """
import os, shutil, signal, sys
from fairseq_pmlm.public_data import cnndm_xsum
from fairseq_pmlm.runtime import output_dir
real = {"rename": os.rename, "rmtree": shutil.rmtree}
def killed(kind):
    def call(*args, **kwargs):
        if kind != sys.argv[1].removesuffix("-before"):
            return real[kind](*args, **kwargs)
        if sys.argv[1] == "rename":  # after it: the old output moved out, the new one not yet in
            real[kind](*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    return call
if sys.argv[1].startswith("rename"):
    output_dir._exchange = lambda a, b: False  # a filesystem without RENAME_EXCHANGE: two renames
os.rename, shutil.rmtree = killed("rename"), killed("rmtree")
sys.exit(cnndm_xsum.main(sys.argv[2:]))
"""


def killed_run(at, *args):
    """get_data.py ARGS in a process SIGKILLed (an OOM kill) right after the swap's first rename
    (``at="rename"``), just before it (``"rename-before"``) or as it starts removing the old
    output (``"rmtree"``)."""
    return subprocess.run([sys.executable, "-c", KILLED_RUN, at, *map(str, args)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": REPO})


@pytest.fixture
def old_and_new(tmp_path):
    out = tmp_path / "raw"
    run_ok("cnndm", F.write_hf(tmp_path / "old", F.articles(seed=3), "cnndm", "jsonl"), out)
    return out, F.raw_files(out), F.write_hf(tmp_path / "new", F.articles(seed=4), "cnndm", "jsonl")


def test_a_sigkill_between_the_two_renames_loses_no_output_the_next_run_puts_the_old_one_back(old_and_new, tmp_path):
    """Killed with the old RAW moved into the staging directory and the new one not yet in place:
    RAW was gone and the next run wrote a fresh one over nothing, saying nothing."""
    out, old, new_src = old_and_new
    assert killed_run("rename", "cnndm", "--from", new_src, "--out", out, "--force").returncode == -9
    assert not out.exists() and len(hidden(tmp_path)) == 1
    proc = get_data("cnndm", "--from", new_src, "--out", out)  # without --force: the old RAW is back, so refused
    assert proc.returncode == 2 and f"{out} exists: pass --force" in proc.stderr, proc.stderr
    assert f"{out} was missing (a run was killed while swapping it in): put back its previous output" in proc.stderr
    assert F.raw_files(out) == old and hidden(tmp_path) == []


def test_a_finished_output_a_sigkill_kept_from_its_place_is_put_there_by_the_next_run(cnndm, tmp_path):
    tmp, _, raw = cnndm
    out = tmp_path / "raw"
    assert killed_run("rename-before", "cnndm", "--from", tmp / "stories", "--out", out).returncode == -9
    assert not out.exists() and len(hidden(tmp_path)) == 1
    proc = get_data("cnndm", "--from", tmp / "stories", "--out", out)
    assert f"{out} was missing (a run was killed while swapping it in): put back the finished new output" in proc.stderr
    assert proc.returncode == 2 and F.raw_files(out) == raw and hidden(tmp_path) == []


def test_a_staging_directory_left_by_a_sigkill_is_removed_by_the_next_run_naming_its_size(old_and_new, tmp_path):
    """Killed after the swap, before the old RAW (in the staging directory) was removed: such
    directories piled up beside RAW, never mentioned. The swap is one exchange: RAW was never missing."""
    out, old, new_src = old_and_new
    assert killed_run("rmtree", "cnndm", "--from", new_src, "--out", out, "--force").returncode == -9
    new = F.raw_files(out)
    assert new != old and len(hidden(tmp_path)) == 1
    left = hidden(tmp_path)[0]
    run = run_ok("cnndm", new_src, out.parent / "other")  # another RAW's run leaves it alone
    assert "removed" not in run.stderr and hidden(tmp_path) == [left]
    proc = get_data("cnndm", "--from", new_src, "--out", out, "--force")
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"removed {re.escape(left)} beside {re.escape(str(out))} \(\d+\.\d kB\), left by a run "
                     "that was killed", proc.stderr), proc.stderr
    assert F.raw_files(out) == new and hidden(tmp_path) == []


def test_an_output_with_a_250_character_name_is_written(cnndm, tmp_path):
    """Legal, but its staging directory's name (.NAME.XXXXXXXX) was too long: "File name too long"."""
    tmp, _, raw = cnndm
    out = tmp_path / ("r" * 250)
    run_ok("cnndm", tmp / "stories", out)
    assert get_data("cnndm", "--from", tmp / "stories", "--out", out, "--force").returncode == 0
    assert F.raw_files(out) == raw and hidden(tmp_path) == []


def test_a_read_only_or_full_disk_is_one_line_naming_the_output_not_its_staging_directory(cnndm, tmp_path,
                                                                                          monkeypatch):
    import errno
    import tempfile

    def mkdtemp(prefix, dir):
        path = os.path.join(dir, prefix + "abcd1234")
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    out = tmp_path / "raw"
    proc = get_data("cnndm", "--from", cnndm[0] / "stories", "--out", out)
    assert proc.returncode == 2
    assert proc.stderr == f"get_data.py: error: {out}: cannot write it: Read-only file system\n"


def test_a_symbolic_link_with_a_trailing_slash_is_refused_as_a_link(cnndm, tmp_path):
    """--force replaced the link itself with a directory (without the slash: refused)."""
    tmp, _, _ = cnndm
    run_ok("cnndm", tmp / "stories", tmp_path / "target")
    os.symlink(tmp_path / "target", tmp_path / "link")
    proc = get_data("cnndm", "--from", tmp / "stories", "--out", f"{tmp_path / 'link'}/", "--force")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "is a symbolic link" in proc.stderr, proc.stderr
    assert os.path.islink(tmp_path / "link") and sorted(os.listdir(tmp_path)) == ["link", "target"]


def test_an_unexpanded_tilde_is_refused_naming_the_path_it_meant(cnndm, tmp_path, monkeypatch):
    """--out=~/raw (bash expands no ~ after "=") wrote ./~/raw and said "wrote ~/raw/..."."""
    tmp, _, _ = cnndm
    monkeypatch.chdir(tmp_path)
    proc = get_data("cnndm", "--from", tmp / "stories", "--out", "~/raw")
    assert proc.returncode == 2 and proc.stderr == (
        f"get_data.py: error: the output ~/raw starts with a ~ the shell did not expand (it does not after '='): "
        f"write {os.path.expanduser('~/raw')}, or leave a space instead of the '='\n")
    assert os.listdir(tmp_path) == []


def test_a_second_run_into_the_same_output_is_refused_while_one_runs(cnndm, tmp_path):
    from fairseq_pmlm.runtime import output_dir

    tmp, _, raw = cnndm
    out = tmp_path / "raw"
    first = output_dir.Output(str(out), False)  # a run under way: its staging directory is held
    try:
        proc = get_data("cnndm", "--from", tmp / "stories", "--out", out)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"{out}: another run is writing it now" in proc.stderr
    finally:
        first.close()
    run_ok("cnndm", tmp / "stories", out)
    assert F.raw_files(out) == raw and hidden(tmp_path) == []


def test_the_output_gets_the_users_umask(cnndm, tmp_path):
    tmp, _, _ = cnndm
    out = tmp_path / "raw"
    proc = subprocess.run([sys.executable, GET_DATA, "cnndm", "--from", str(tmp / "stories"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, preexec_fn=lambda: os.umask(0o027))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o750  # mkdtemp's 0700 before
    assert stat.S_IMODE(os.stat(out / "train.source").st_mode) == 0o640


def test_the_script_runs_as_a_command(cnndm, tmp_path):
    """scripts/s2s/get_data.py itself, as a user runs it: the output, and a bad input's one line."""
    tmp, _, raw = cnndm
    proc = subprocess.run([sys.executable, GET_DATA, "cnndm", "--from", tmp / "stories", "--out", tmp_path / "raw"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert F.raw_files(tmp_path / "raw") == raw
    proc = subprocess.run([sys.executable, GET_DATA, "cnndm", "--from", tmp_path / "none", "--out", tmp_path / "x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("get_data.py: error: ") and proc.stderr.count("\n") == 1
