r"""One GLUE task folder (the TSV files of the GLUE download) -> the binarized layout of
fairseq's sentence_prediction task, tokenised and numbered as in pre-training:

    DESTDIR/input0/{train,valid}.{bin,idx}, dict.txt   sentence A (the pre-training dict.txt)
    DESTDIR/input1/...                                 sentence B (pair tasks)
    DESTDIR/label/...  or  label/{train,valid}.label   class labels, or STS-B's scores

MNLI's dev_mismatched becomes ``valid1`` (``--valid-subset valid,valid1``). DESTDIR follows the
one output rule (``runtime/output_dir.py``): an existing one is replaced only with --force, never
the current or home directory nor one that holds the GLUE folder, and it is built beside itself
and swapped in whole. Errors are one line (``prepare_glue.py: error: ...``), exit status 2.

    python scripts/glue/prepare_glue.py --task RTE --glue-dir glue_data/RTE \
        --pretrain-data data-bin/NAME --destdir data-bin/glue/RTE [--force]
    # --pretrain-data: a pre-training data directory (dict.txt + spm.model) or a convert_checkpoint.py
    # output (dict.txt + vocab.txt); or name the files: --spm-model M.model --srcdict dict.txt
"""
import argparse
import json
import logging
import os
import shutil

import sentencepiece as spm

from ..runtime import output_dir
from ..runtime.interrupts import one_line_exit
from ..text import tokenizer_files
from .glue_tsv import TASKS, GlueFormatError, read_glue_tsv

PROG = "prepare_glue.py"  # the command line: scripts/glue/prepare_glue.py


def binarize(text, destdir, srcdict, split):
    """fairseq-preprocess --only-source of one text file into DESTDIR/SPLIT.{bin,idx} (and
    dict.txt), in this process (the same code as the CLI). It names its outputs after the
    flag (train/valid), so it writes into a scratch folder and the files are moved."""
    from fairseq import options
    from fairseq_cli import preprocess

    # it logs its whole namespace per call: keep warnings and errors only
    for name in ("fairseq", "fairseq_cli"):
        logging.getLogger(name).setLevel(logging.WARNING)
    scratch = os.path.join(destdir, "_scratch")
    args = ["--only-source", "--srcdict", srcdict, "--destdir", scratch, "--workers", "1", "--trainpref", text]
    log = logging.getLogger("fairseq_cli.preprocess")
    before = list(log.handlers)
    try:
        preprocess.main(options.get_preprocessing_parser().parse_args(args))
    finally:  # it adds a FileHandler per call
        for h in log.handlers[len(before):]:
            log.removeHandler(h)
            h.close()
    for ext in ("bin", "idx"):
        os.replace(os.path.join(scratch, f"train.{ext}"), os.path.join(destdir, f"{split}.{ext}"))
    os.replace(os.path.join(scratch, "dict.txt"), os.path.join(destdir, "dict.txt"))
    shutil.rmtree(scratch)


def read_split(task, glue_dir, split):
    """The rows of GLUE_DIR/SPLIT.tsv; a missing file or a bad row is a GlueFormatError (one line)."""
    path = os.path.join(glue_dir, f"{split}.tsv")
    if not os.path.isfile(path):
        raise GlueFormatError(f"{path}: not found (a GLUE {task.name} folder has "
                              f"{', '.join(s + '.tsv' for s in task.splits)})")
    rows, skipped = read_glue_tsv(path, task)
    if skipped:
        print(f"prepare_glue: {path}: skipped {skipped} rows with missing columns (as the reference processors do)")
    return rows


def write_split(task, rows, work, name, sp, srcdict):
    """WORK/{input0,input1,label}/NAME.*: the sentences tokenised and binarized with the
    pre-training dictionary, the labels with a fixed label dictionary (or as text, regression)."""
    columns = {"input0": [r[0] for r in rows], "label": [r[2] for r in rows]}
    if len(task.columns) > 1:
        columns["input1"] = [r[1] for r in rows]
    for key, lines in columns.items():
        os.makedirs(os.path.join(work, key), exist_ok=True)
        raw = os.path.join(work, key, f"{name}.raw")
        with open(raw, "w", encoding="utf-8") as out:
            for line in lines:
                out.write((line if key == "label" else " ".join(sp.encode(line, out_type=str))) + "\n")
        if key == "label" and task.labels is None:  # regression: sentence_prediction reads the text
            os.replace(raw, os.path.join(work, key, f"{name}.label"))
            continue
        if key == "label":  # a fixed label dictionary: class i is labels[i] on every split
            key_dict = os.path.join(work, "labels.txt")
            with open(key_dict, "w") as out:
                out.writelines(f"{label} 1\n" for label in task.labels)
        else:
            key_dict = srcdict
        binarize(raw, os.path.join(work, key), key_dict, name)
        os.remove(raw)


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=sorted(TASKS))
    p.add_argument("--glue-dir", required=True,
                   help="the task's folder: train.tsv, dev.tsv (MNLI: dev_matched.tsv ...)")
    p.add_argument("--pretrain-data", help="directory with the pre-training dict.txt and tokenizer (spm.model, "
                                           "or the vocab.txt of converted weights)")
    p.add_argument("--spm-model", help="the pre-training sentencepiece model (instead of --pretrain-data)")
    p.add_argument("--srcdict", help="the pre-training dictionary (with --spm-model)")
    p.add_argument("--destdir", required=True)
    p.add_argument("--force", action="store_true", help="replace an existing DESTDIR")
    a = p.parse_args(argv)
    task = TASKS[a.task]
    if bool(a.pretrain_data) == bool(a.spm_model or a.srcdict) or bool(a.spm_model) != bool(a.srcdict):
        p.error("give --pretrain-data DIR, or --spm-model and --srcdict")
    if a.pretrain_data:
        a.srcdict = os.path.join(a.pretrain_data, "dict.txt")
    for f in (a.spm_model, a.srcdict):
        if f and not os.path.isfile(f):
            p.error(f"file not found: {f}")
    if a.pretrain_data:
        try:
            tokenizer_files.find(a.pretrain_data)  # none, or two: a usage error before anything runs
        except ValueError as e:
            p.error(str(e))

    def encoder():  # loading it imports the tokenizer's library (seconds): under one_line_exit, Ctrl-C is one line
        if a.pretrain_data:
            return tokenizer_files.piece_encoder(a.pretrain_data)
        return spm.SentencePieceProcessor(model_file=a.spm_model)

    return one_line_exit(PROG, lambda: build(a, task, encoder()), out=a.destdir)


def build(a, task, sp):
    """DESTDIR, built beside itself and swapped in (``runtime/output_dir.py``)."""
    inputs = [f for f in (a.glue_dir, a.srcdict, a.spm_model, a.pretrain_data) if f]
    with output_dir.building(a.destdir, a.force, inputs=inputs, error=GlueFormatError,
                             hint="--destdir") as output:
        work = output.path
        for split, name in zip(task.splits, ["train", "valid", "valid1"]):
            rows = read_split(task, a.glue_dir, split)
            print(f"prepare_glue: {os.path.join(a.glue_dir, split + '.tsv')}: {len(rows)} examples -> {name}")
            write_split(task, rows, work, name, sp, a.srcdict)
            if name == "train":
                n_train = len(rows)
        with open(os.path.join(work, "meta.json"), "w") as out:  # finetune_glue.sh sizes its schedule from it
            json.dump({"task": task.name, "train_examples": n_train, "metric": task.metric,
                       "num_classes": len(task.labels) if task.labels else 1}, out)
        if os.path.exists(os.path.join(work, "labels.txt")):
            os.remove(os.path.join(work, "labels.txt"))
        # the tokenizer the pieces came from, for the hub's encode() (from_pretrained(SAVE, ...,
        # data_name_or_path=DESTDIR), as RoBERTa's GLUE models are loaded): without it, it split on spaces
        if a.pretrain_data:
            tokenizer_files.copy(a.pretrain_data, work)
        else:
            shutil.copy(a.spm_model, os.path.join(work, tokenizer_files.SENTENCEPIECE))
    print(f"prepare_glue: wrote {a.destdir}")
