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
The readers of each form are ``cnndm_xsum_readers.py``; here the form is found and RAW written.
"""
import argparse
import json
import os
import re

from ..runtime import output_dir
from ..runtime.interrupts import one_line_exit
from ..symbols import SENTENCE_SEP
from .cnndm_xsum_readers import DataError, hf_rows, s2sft_rows, story_rows, text_lines

PROG = "get_data.py"  # the command line: scripts/s2s/get_data.py
SPLITS = ("train", "valid", "test")
SPLIT_NAMES = {"train": "train", "validation": "valid", "valid": "valid", "val": "valid", "dev": "valid",
               "test": "test"}
FIELDS = {"cnndm": ("article", "highlights"), "xsum": ("document", "summary")}
URL_LISTS = {"all_train.txt": "train", "all_val.txt": "valid", "all_test.txt": "test"}
METADATA = {"dataset_info.json", "state.json", "dataset_dict.json"}
MARKER = ".get_data"  # in every RAW written here: what --force may replace


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
    p = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", choices=sorted(FIELDS))
    p.add_argument("--from", dest="src", required=True, metavar="PATH", help="the release as you hold it")
    p.add_argument("--out", required=True, metavar="RAW", help="output directory, e.g. raw/cnndm")
    p.add_argument("--force", action="store_true", help="replace an existing RAW")
    a = p.parse_args(argv)
    return one_line_exit(PROG, lambda: build(a), out=a.out)  # the staging directory goes on SIGTERM too


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

