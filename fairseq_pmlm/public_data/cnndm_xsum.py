"""CNN/DailyMail or XSum, from a public release as you hold it, to RAW/{train,valid,test}.{source,target}
(one example a line, what scripts/s2s/prepare.sh reads) and RAW/test.target.sentences (the test
references, one sentence a line, a blank line after each example: what ROUGE-1.5.5 tools read).

    python scripts/s2s/get_data.py cnndm --from PATH --out raw/cnndm [--force]
    python scripts/s2s/get_data.py xsum --from PATH --out raw/xsum

PATH is a directory in one of these forms (found by looking at its files):
- the Hugging Face datasets (cnn_dailymail 3.0.0: article, highlights, id; EdinburghNLP/xsum:
  document, summary, id) as parquet files, JSON lines files or a save_to_disk folder (.arrow),
  a split's files named or foldered train / validation / test;
- CNN/DailyMail's original .story files (cnn/stories, dailymail/stories) with the standard split
  lists all_train.txt, all_val.txt, all_test.txt (one URL a line; a story is named by the sha1 of
  its URL), read as the Hugging Face script reads them (a period added to lines without an end
  mark, highlights after each @highlight);
- s2s-ft's preprocessed files: {train,dev|validation,test}.json (JSON lines of "src" and "tgt",
  text or WordPiece token lists) and, for a test split without targets, its test.target
  references (" <S_SEP> " between sentences) beside test.json; no other *.target file is read.

Sources are one line (newlines become spaces). CNN/DailyMail targets keep their sentence
boundaries as " [X_SEP] " (s2s-ft's separator: prepare.sh keeps it one token, the model learns to
emit it, score.py splits there); XSum's are one sentence. Files are read as streams (parquet by
batches of rows, JSON lines and stories line by line). Train and valid examples with an empty
source or target are dropped and counted; the test split is kept whole. Text fields must hold
text (a column of bytes or numbers is refused, naming it and the file).

RAW is never inside PATH (nor PATH itself, the current or home directory), and --force replaces
only a directory get_data.py wrote (it holds a .get_data marker). RAW is built beside itself and
swapped in with renames (fairseq_pmlm/runtime/output_dir.py): an error, Ctrl-C or SIGTERM at any
instant leaves the old RAW or the new one whole and no temporary directory; a second run into the
same RAW while one runs is refused. Errors are one line (get_data.py: error: ...), exit status 2.
"""
import argparse
import hashlib
import json
import os
import re

from ..runtime import output_dir
from ..runtime.interrupts import one_line_exit
from ..symbols import SENTENCE_SEP

PROG = "get_data.py"  # the command line: scripts/s2s/get_data.py
SPLITS = ("train", "valid", "test")
SPLIT_NAMES = {"train": "train", "validation": "valid", "valid": "valid", "val": "valid", "dev": "valid",
               "test": "test"}
FIELDS = {"cnndm": ("article", "highlights"), "xsum": ("document", "summary")}
URL_LISTS = {"all_train.txt": "train", "all_val.txt": "valid", "all_test.txt": "test"}
# the end marks after which the Hugging Face script adds no period (curly closing quotes included)
END_MARKS = (".", "!", "?", "...", "'", "`", '"', "\u2019", "\u201d", ")")
METADATA = {"dataset_info.json", "state.json", "dataset_dict.json"}
BATCH_ROWS = 1000
MARKER = ".get_data"  # in every RAW written here: what --force may replace


class DataError(Exception):
    """Bad input; the message is the one line the user sees."""


# ---------------------------------------------------------------- reading text
def text_lines(path):
    """Decoded lines of a text file (without their newline, nor a leading byte order mark), one at
    a time; bad UTF-8 -> DataError naming the file and line."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
                yield line.removeprefix("\ufeff") if n == 1 else line  # a UTF-8 byte order mark: not text
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{n}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                                "convert it, e.g. iconv -f latin1 -t utf-8") from None


def json_lines(path):
    """(line number, parsed value) of a JSON-lines file's non-blank lines; bad JSON -> DataError."""
    for n, line in enumerate(text_lines(path), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except ValueError as e:
            raise DataError(f"{path}:{n}: not a JSON object ({e.msg})") from None


def one_line(text):
    return " ".join(str(text or "").split())


def split_of(relative):
    """train / valid / test from a data file's path inside PATH (its name or a folder's), or None."""
    parts = re.split(r"[/\\]", relative)
    for part in reversed(parts):
        m = re.match(r"(train|validation|valid|val|dev|test)(?=$|[-_.])", part)
        if m:
            return SPLIT_NAMES[m.group(1)]
    return None


# ---------------------------------------------------------------- the forms
def hf_rows(path, kind, fields):
    """(source, target sentences) of a Hugging Face split file, streamed."""
    if kind == "jsonl":
        for n, row in json_lines(path):
            missing = [f for f in fields if not isinstance(row, dict) or f not in row]
            if missing:
                raise DataError(f"{path}:{n}: no {' / '.join(missing)} field (expected {', '.join(fields)})")
            for field, value, lists in ((fields[0], row[fields[0]], False), (fields[1], row[fields[1]], True)):
                if not is_text(value, lists):
                    raise DataError(f"{path}:{n}: the {field} field holds {type(value).__name__}, not text")
            yield row[fields[0]], row[fields[1]]
        return
    for batch in arrow_batches(path, kind, fields):
        yield from zip(*(batch.column(f).to_pylist() for f in fields))


def arrow_batches(path, kind, fields):
    pa = pyarrow()
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            f = pq.ParquetFile(path)
            check_columns(path, f.schema_arrow, fields)
            yield from f.iter_batches(batch_size=BATCH_ROWS, columns=list(fields))
            return
        import pyarrow.ipc as ipc

        with pa.memory_map(path) as source:
            try:
                reader = ipc.open_stream(source)  # what save_to_disk writes
            except pa.ArrowInvalid:
                reader = ipc.open_file(source)
                reader = (reader.get_batch(i) for i in range(reader.num_record_batches))
            for batch in reader:
                check_columns(path, batch.schema, fields)
                yield batch
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: not a readable {kind} file ({str(e).splitlines()[0]})") from None


def is_text(value, lists):
    """A text field's value: text or nothing, and for a target (``lists``) a list of sentences too."""
    if value is None or isinstance(value, str):
        return True
    return lists and isinstance(value, list) and all(isinstance(s, str) for s in value)


def check_columns(path, schema, fields):
    missing = [f for f in fields if f not in schema.names]
    if missing:
        raise DataError(f"{path}: no {' / '.join(missing)} column (it has {', '.join(schema.names)}; expected "
                        f"{', '.join(fields)})")
    pa = pyarrow()
    for field, lists in ((fields[0], False), (fields[1], True)):
        kind = plain_type(schema.field(field).type)
        inner = plain_type(kind.value_type) if lists and (pa.types.is_list(kind) or pa.types.is_large_list(kind)) \
            else None
        text = (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
                or inner is not None and (pa.types.is_string(inner) or pa.types.is_large_string(inner)))
        if not text:  # bytes would be written as b'...', numbers and structs stop in the middle
            raise DataError(f"{path}: the {field} column holds {kind}, not text (convert it to strings)")


def plain_type(kind):
    """A dictionary-encoded column's type is its values' (each row reads as the value)."""
    return kind.value_type if pyarrow().types.is_dictionary(kind) else kind


def pyarrow():
    try:
        import pyarrow as pa
    except ImportError:
        raise DataError("reading parquet and .arrow files needs pyarrow: pip install pyarrow==26.0.1 "
                        "(requirements.txt pins it)") from None
    return pa


def read_story(path):
    """(article, highlights) of a .story file, as the Hugging Face cnn_dailymail script reads it."""
    article, highlights, after_marker = [], [], False
    for line in text_lines(path):
        line = line.strip()
        if not line:
            continue
        if line.startswith("@highlight"):
            after_marker = True
            continue
        if not line.endswith(END_MARKS):
            line += " ."  # image captions and the like would run into the next sentence
        (highlights if after_marker else article).append(line)
    if not highlights:
        raise DataError(f"{path}: a .story file with no highlights (no line after an @highlight line)")
    return " ".join(article), highlights


def s2sft_text(value, path, n):
    """An s2s-ft field: text, or WordPiece tokens (## pieces joined to the one before)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise DataError(f"{path}:{n}: src/tgt must be text or a list of tokens")
    words = []
    for t in value:
        if t.startswith("##") and words:
            words[-1] += t[2:]
        else:
            words.append(t)
    return " ".join(words)


def s2sft_rows(json_path, gold_path):
    """(source, target) of an s2s-ft split: its JSON lines, the targets from ``gold_path`` when given."""
    gold = iter(text_lines(gold_path)) if gold_path else None
    n_gold = 0
    for n, row in json_lines(json_path):
        if not isinstance(row, dict) or "src" not in row:
            raise DataError(f"{json_path}:{n}: no src field (s2s-ft's files hold src and tgt)")
        if gold is not None:
            target = next(gold, None)
            if target is None:
                raise DataError(f"{gold_path} has {n_gold} lines but {json_path} has more examples: "
                                "sources and targets do not line up")
            n_gold += 1
        elif "tgt" in row:
            target = s2sft_text(row["tgt"], json_path, n)
        else:
            raise DataError(f"{json_path}:{n}: no tgt field, and no {os.path.basename(json_path)[:-5]}.target "
                            "beside it")
        yield s2sft_text(row["src"], json_path, n), target
    if gold is not None and next(gold, None) is not None:
        raise DataError(f"{gold_path} has more lines than {json_path} has examples: sources and targets do not "
                        "line up")


def target_sentences(dataset, target):
    """The target's sentences (CNN/DailyMail: at newlines, [X_SEP] and <S_SEP>; XSum: one)."""
    if isinstance(target, list):
        sents = [one_line(s) for s in target]
    elif dataset == "cnndm":
        sents = [one_line(s) for s in re.split(r"\n|\[X_SEP\]|<S_SEP>", target or "")]
    else:
        sents = [one_line(target)]
    return [s for s in sents if s]


# ---------------------------------------------------------------- finding the form
def survey(root):
    """What PATH holds: {"form": ..., ...}; DataError naming a file of no form read here."""
    if not os.path.exists(root):
        raise DataError(f"--from {root}: no such file or directory")
    if not os.path.isdir(root):
        kind = data_kind(root)
        if kind is None:
            raise DataError(f"{root}: not a form get_data.py reads (Hugging Face parquet / JSON lines / .arrow, "
                            ".story files with split lists, s2s-ft's .json files)")
        raise DataError(f"{root}: --from takes the directory that holds the train, validation and test files")
    files = []
    for d, subdirs, names in os.walk(root):
        subdirs.sort()
        files += [os.path.join(d, n) for n in sorted(names) if not n.startswith(".")]
    stories = {}
    url_lists, data, unknown = {}, [], []
    for path in files:
        name, rel = os.path.basename(path), os.path.relpath(path, root)
        if name.endswith(".story"):
            stories[name[:-len(".story")]] = path
        elif name in URL_LISTS:
            url_lists[URL_LISTS[name]] = path
        elif name in METADATA:
            continue
        elif name.endswith(".target"):
            continue  # s2s-ft's references: read beside their split's .json only (s2sft_gold)
        else:
            kind = data_kind(path)
            if kind is None:
                unknown.append(path)
            else:
                data.append((kind, split_of(rel), path))
    if stories or url_lists:
        if data:
            raise DataError(f"{root} holds both .story files and {data[0][2]}: give one form at a time")
        return {"form": ".story files + split lists", "stories": stories, "lists": url_lists}
    if not data:
        if unknown:
            raise DataError(f"{unknown[0]}: not a form get_data.py reads (Hugging Face parquet / JSON lines / "
                            ".arrow, .story files with split lists, s2s-ft's .json files)")
        raise DataError(f"{root}: no data files in it")
    kinds = {k for k, _, _ in data}
    if len(kinds) > 1:
        raise DataError(f"{root} mixes {' and '.join(sorted(kinds))} files: give one form at a time")
    return {"form": "s2s-ft" if "s2sft" in kinds else kinds.pop(), "data": data}


def data_kind(path):
    """parquet, arrow, jsonl (Hugging Face rows), s2sft (s2s-ft's rows) or None."""
    name = path.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".arrow"):
        return "arrow"
    if name.endswith((".json", ".jsonl")):
        for line in text_lines(path):
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:
                    return None
                if not isinstance(row, dict):
                    return None
                return "s2sft" if "src" in row else "jsonl"
        return "jsonl"
    return None


def splits_of(dataset, found):
    """{split: iterator of (source, target sentences)} for the form ``found``."""
    fields = FIELDS[dataset]
    if found["form"] == ".story files + split lists":
        missing = [f"all_{'val' if s == 'valid' else s}.txt" for s in SPLITS if s not in found["lists"]]
        if missing:
            raise DataError(f"no split list {', '.join(missing)} beside the .story files (CNN/DailyMail's "
                            "standard URL lists: all_train.txt, all_val.txt, all_test.txt)")
        if dataset != "cnndm":
            raise DataError(".story files are CNN/DailyMail's form, not XSum's")
        return {s: story_rows(found["lists"][s], found["stories"]) for s in SPLITS}
    by_split = {}
    for kind, split, path in found["data"]:
        if split is None:
            raise DataError(f"{path}: which split? (name it or its folder train, validation or test)")
        by_split.setdefault(split, []).append((kind, path))
    missing = [s for s in SPLITS if s not in by_split]
    if missing:
        raise DataError(f"no {' / '.join(missing)} split among the files of the {found['form']} form "
                        "(train, validation and test are needed)")

    def rows(split):
        for kind, path in by_split[split]:
            if kind == "s2sft":
                yield from s2sft_rows(path, s2sft_gold(path))
            else:
                yield from hf_rows(path, kind, fields)
    return {s: rows(s) for s in SPLITS}


def s2sft_gold(json_path):
    """s2s-ft's reference file of a split: SPLIT.target beside SPLIT.json, or None."""
    gold = os.path.splitext(json_path)[0] + ".target"
    return gold if os.path.isfile(gold) else None


def story_rows(list_path, stories):
    for n, url in enumerate(text_lines(list_path), 1):
        url = url.strip()
        if not url:
            continue
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()
        if digest not in stories:
            raise DataError(f"{list_path}:{n}: {url} -> {digest}.story is not among the .story files")
        yield read_story(stories[digest])


# ---------------------------------------------------------------- writing
def write(dataset, splits, tmp):
    counts = {}
    for split in SPLITS:
        kept = dropped = 0
        paths = [os.path.join(tmp, f"{split}.{side}") for side in ("source", "target")]
        with open(paths[0], "w", encoding="utf-8") as fs, open(paths[1], "w", encoding="utf-8") as ft, \
                open(os.path.join(tmp, "test.target.sentences") if split == "test" else os.devnull, "w",
                     encoding="utf-8") as fsent:
            for source, target in splits[split]:
                source, sents = one_line(source), target_sentences(dataset, target)
                if split != "test" and (not source or not sents):
                    dropped += 1
                    continue
                fs.write(source + "\n")
                ft.write(f" {SENTENCE_SEP} ".join(sents) + "\n")
                fsent.write("".join(s + "\n" for s in sents) + "\n")
                kept += 1
        if kept == 0:
            raise DataError(f"the {split} split holds no example")
        counts[split] = (kept, dropped)
    return counts


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("dataset", choices=sorted(FIELDS))
    p.add_argument("--from", dest="src", required=True, metavar="PATH", help="the release as you hold it")
    p.add_argument("--out", required=True, metavar="RAW", help="output directory, e.g. raw/cnndm")
    p.add_argument("--force", action="store_true", help="replace an existing RAW")
    a = p.parse_args(argv)
    return one_line_exit(PROG, lambda: build(a), DataError, a.out)  # the staging directory goes on SIGTERM too


def build(a):
    """get_data's work: RAW built beside itself and swapped in (runtime/output_dir.py)."""
    # refused before anything is read or written: the input's own tree, or a RAW not written here
    output_dir.check(a.out, a.force, inputs=[a.src], within=[a.src], marker=(MARKER, PROG), error=DataError,
                     hint="--out")
    found = survey(a.src)
    splits = splits_of(a.dataset, found)
    with output_dir.building(a.out, a.force, inputs=[a.src], within=[a.src], marker=(MARKER, PROG),
                             error=DataError, hint="--out") as output:
        print(f"get_data: {a.dataset} from {a.src} ({found['form']})", flush=True)
        counts = write(a.dataset, splits, output.path)
    for split in SPLITS:
        kept, dropped = counts[split]
        note = f" ({dropped:,} with an empty source or target dropped)" if dropped else ""
        print(f"get_data:   {split}: {kept:,} examples{note}")
    print(f"get_data: wrote {a.out}/{{train,valid,test}}.{{source,target}}, {a.out}/test.target.sentences")

