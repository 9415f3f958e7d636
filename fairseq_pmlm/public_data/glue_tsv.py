"""Reading the standard GLUE task folders (the TSV files of the GLUE download) into
(sentence A, sentence B or None, label) rows, and what each task is scored by.

Column choices follow fairseq's ``examples/roberta/preprocess_GLUE_tasks.sh`` (0-based here).
A row with too few columns is an error naming the file and line, except in QQP, whose
official training file has such rows and whose reference processors skip them: those are
skipped and counted.
"""
import csv
import math
import sys
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import BadInput

# the QQP and MNLI files hold some very long fields
csv.field_size_limit(sys.maxsize)


@dataclass(frozen=True)
class GlueTask:
    name: str
    splits: Tuple[str, ...]        # train first, then the dev files (MNLI has two)
    header: bool                   # CoLA alone has no header row
    columns: Tuple[int, ...]       # sentence A (and B) column
    label_column: int              # -1: the last column (MNLI's dev files have more columns than train)
    labels: Optional[Tuple[str, ...]]  # None: a regression target
    metric: str                    # what the paper reports for it
    skip_short_rows: bool = False


TASKS = {t.name: t for t in [
    GlueTask("CoLA", ("train", "dev"), False, (3,), 1, ("0", "1"), "mcc"),
    GlueTask("SST-2", ("train", "dev"), True, (0,), 1, ("0", "1"), "accuracy"),
    GlueTask("MRPC", ("train", "dev"), True, (3, 4), 0, ("0", "1"), "f1"),
    GlueTask("STS-B", ("train", "dev"), True, (7, 8), 9, None, "pearson"),
    GlueTask("QQP", ("train", "dev"), True, (3, 4), 5, ("0", "1"), "f1", skip_short_rows=True),
    GlueTask("MNLI", ("train", "dev_matched", "dev_mismatched"), True, (8, 9), -1,
             ("contradiction", "entailment", "neutral"), "accuracy"),
    GlueTask("QNLI", ("train", "dev"), True, (1, 2), 3, ("entailment", "not_entailment"), "accuracy"),
    GlueTask("RTE", ("train", "dev"), True, (1, 2), 3, ("entailment", "not_entailment"), "accuracy"),
    GlueTask("WNLI", ("train", "dev"), True, (1, 2), 3, ("0", "1"), "accuracy"),
]}


class GlueFormatError(BadInput):
    pass


def read_glue_tsv(path, task: GlueTask):
    """-> (rows, skipped): rows of (A, B or None, label string); ``skipped`` counts the QQP
    rows with missing columns. Raises GlueFormatError naming ``path:line`` otherwise."""
    rows, skipped = [], 0
    need = max(task.columns + (task.label_column,)) + 1
    with open(path, encoding="utf-8", newline="") as f:
        # QUOTE_NONE: GLUE's sentences contain unbalanced quotes that are text, not quoting
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for line_no, fields in enumerate(reader, start=1):
            if task.header and line_no == 1:
                continue
            if not fields or fields == [""]:
                continue
            if len(fields) < need:
                if task.skip_short_rows:
                    skipped += 1
                    continue
                raise GlueFormatError(f"{path}:{line_no}: {len(fields)} tab-separated columns, "
                                      f"{task.name} needs at least {need}")
            label = fields[task.label_column].strip()
            if task.labels is None:
                try:
                    finite = math.isfinite(float(label))  # ("nan", "inf" parse: a loss of NaN later)
                except ValueError:
                    finite = False
                if not finite:
                    raise GlueFormatError(f"{path}:{line_no}: {task.name} score {label!r} is not a number")
            elif label not in task.labels:
                raise GlueFormatError(f"{path}:{line_no}: {task.name} label {label!r} is not one of "
                                      f"{', '.join(task.labels)}")
            a = fields[task.columns[0]].strip()
            b = fields[task.columns[1]].strip() if len(task.columns) > 1 else None
            rows.append((a, b, label))
    if not rows:
        raise GlueFormatError(f"{path}: no examples")
    return rows, skipped
