#!/usr/bin/env python
"""Summarisation pairs -> an understanding task on the same text: does this summary belong to
this document? A sentence-pair classification in GLUE's QNLI format (index, question, sentence,
label), so that ``prepare_glue.py --task QNLI`` and ``finetune_glue.sh`` take it unchanged and
the objective ablation can be scored the way the paper scores it (understanding, not generation).

Every pair gives two rows: its own summary (``entailment``) and another pair's
(``not_entailment``). ``--negatives random`` (the default) draws that pair at random from the
same split (seeded: every run gets the same file); ``--negatives neighbour`` takes the nearest
pair in file order whose summary differs once lower-cased and stripped of punctuation. Pairs are
written module by module, so a neighbour is mostly a sibling in the same class, its summary
sharing words with the right one: a harder task (the main job's released model, fine-tuned 200
updates on it, stayed at 50% on dev). One pair of the main job's test set::

    source  "Decimal . isinfinity (): 0 if finite or not a number 1 if +INF -1 if -INF"
    row 1   "Compare the two non-NaN decimal instances self and other."  + source  -> not_entailment
    row 2   "Returns whether the number is infinite"                     + source  -> entailment

(row 1 as ``neighbour`` makes it: the next pair's summary; ``random``'s may come from any module).
The source is cut to its first ``--max-source-words`` words: a summary is about the heading and
the body's start, and fine-tuning's cost grows with the length. train.tsv comes from the
``train`` pairs, dev.tsv from ``--dev-splits`` (held out of every stage).

    python scripts/make_matching_task.py --pairs DIR/corpus/pairs --out DIR/matching \
        [--dev-splits valid,test] [--max-source-words 48] [--negatives random|neighbour] [--seed 1]
"""
import argparse
import os
import random
import re
import sys

from lib.import_guard import interruptible, without_registration  # scripts/lib

without_registration()  # it needs no fairseq
with interruptible("make_matching_task.py"):
    from fairseq_pmlm.errors import BadInput
    from fairseq_pmlm.runtime import output_dir
    from fairseq_pmlm.runtime.interrupts import one_line_exit
    from fairseq_pmlm.text.lines import read_lines

PROG = "make_matching_task.py"
HEADER = "index\tquestion\tsentence\tlabel\n"  # QNLI's columns


def key(summary):
    return re.sub(r"[\W_]+", " ", summary.lower()).strip()


def neighbour(i, summaries):
    """The index of the pair nearest to ``i`` in file order (later first) whose summary differs
    from pair i's; None when every summary of the split is the same."""
    for d in range(1, len(summaries)):
        for j in (i + d, i - d):
            if 0 <= j < len(summaries) and key(summaries[j]) != key(summaries[i]):
                return j
    return None


def random_other(i, summaries, rng):
    """A pair drawn at random whose summary differs from pair i's (None: all the same)."""
    if all(key(s) == key(summaries[i]) for s in summaries):
        return None
    while True:
        j = rng.randrange(len(summaries))
        if key(summaries[j]) != key(summaries[i]):
            return j


def clean(text):  # one TSV field: QNLI's files are read without quoting
    return " ".join(text.split())


def rows(sources, summaries, max_words, negatives, rng):
    for i, (source, summary) in enumerate(zip(sources, summaries)):
        j = neighbour(i, summaries) if negatives == "neighbour" else random_other(i, summaries, rng)
        if j is None:
            raise BadInput("every summary of the split is the same: no pair has a different one to match against")
        document = clean(" ".join(source.split()[:max_words]))
        yield clean(summaries[j]), document, "not_entailment"
        yield clean(summary), document, "entailment"


def read_split(pairs, split):
    paths = [os.path.join(pairs, f"{split}.{side}") for side in ("source", "target")]
    for path in paths:
        if not os.path.isfile(path):
            raise BadInput(f"{path}: not found (--pairs needs SPLIT.source and SPLIT.target)")
    sources, summaries = (read_lines(path) for path in paths)
    if len(sources) != len(summaries):
        raise BadInput(f"{paths[0]}: {len(sources)} lines, {paths[1]}: {len(summaries)}: a pair a line in each")
    if len(sources) < 2:
        raise BadInput(f"{paths[0]}: {len(sources)} pair(s): matching needs at least two")
    return sources, summaries


def write_tsv(path, examples):
    with open(path, "w", encoding="utf-8") as out:
        out.write(HEADER)
        for n, (question, sentence, label) in enumerate(examples):
            out.write(f"{n}\t{question}\t{sentence}\t{label}\n")
    return n + 1


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", required=True, help="a folder of SPLIT.source / SPLIT.target (one pair a line)")
    p.add_argument("--out", required=True, help="the task folder to write: train.tsv, dev.tsv")
    p.add_argument("--dev-splits", default="test", help="the pairs' splits that make dev.tsv (default: %(default)s)")
    p.add_argument("--max-source-words", type=int, default=48, help="words of each source kept (default: %(default)s)")
    p.add_argument("--negatives", choices=("random", "neighbour"), default="random",
                   help="whose summary a negative row gets (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="the draw of random negatives (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    a = p.parse_args(argv)
    if a.max_source_words < 1:
        p.error(f"--max-source-words must be positive: {a.max_source_words}")
    dev_splits = [s for s in a.dev_splits.split(",") if s]
    if not dev_splits or "train" in dev_splits:
        p.error(f"--dev-splits: held-out splits of --pairs, not train: {a.dev_splits!r}")
    return one_line_exit(PROG, lambda: build(a, dev_splits), out=a.out)


def build(a, dev_splits):
    """OUT, built beside itself and swapped in whole (``runtime/output_dir.py``)."""
    splits = {"train": [read_split(a.pairs, "train")], "dev": [read_split(a.pairs, s) for s in dev_splits]}
    with output_dir.building(a.out, a.force, inputs=[a.pairs], error=BadInput, hint="--out") as output:
        for name, parts in splits.items():
            rng = random.Random(f"{a.seed}-{name}")  # each file its own draw: dev.tsv whatever train holds
            examples = [r for sources, summaries in parts
                        for r in rows(sources, summaries, a.max_source_words, a.negatives, rng)]
            n = write_tsv(os.path.join(output.path, f"{name}.tsv"), examples)
            print(f"{PROG}: {name}.tsv: {n} examples ({n // 2} pairs, half their own summary)")
    print(f"{PROG}: wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
