#!/usr/bin/env python
"""A GLUE-fine-tuned checkpoint's prediction for every row of a labelled TSV of its task, through
the hub as RoBERTa's README evaluates on dev (``encode(a, b)``, ``predict(head, tokens)``, the
label read from the task's label dictionary), batched. Writes one line a row (``index
prediction label``) and prints the task's score: accuracy for a classification, Pearson's r for
STS-B. Per-row predictions are what a paired comparison of two models needs (the same rows,
right or wrong in each); fairseq-train's validation gives only the total, which this reproduces.

    python scripts/glue/predict_glue.py --checkpoint checkpoints/glue/RTE/checkpoint_best.pt \
        --data data-bin/glue/RTE --glue-dir glue_data/RTE --task RTE [--split dev] [--out preds.tsv] [--cpu]
    # -> predict_glue: RTE glue_data/RTE/dev.tsv: accuracy 71.48 (198 of 277)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/, for lib/
from lib.import_guard import interruptible  # noqa: E402

PROG = "predict_glue.py"
with interruptible(PROG):
    import torch
    from fairseq.data.data_utils import collate_tokens

    from fairseq_pmlm.errors import BadInput
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model
    from fairseq_pmlm.public_data.glue_tsv import TASKS, read_glue_tsv
    from fairseq_pmlm.runtime.checkpoint_files import write_atomically
    from fairseq_pmlm.runtime.interrupts import one_line_exit

HEAD = "sentence_classification_head"  # the name fairseq's sentence_prediction task trains


def predictions(hub, rows, batch_size):
    """Each row's label (a classification) or score (a regression), in the rows' order."""
    labels, limit = hub.task.label_dictionary, hub.model.max_positions()
    out = []
    for start in range(0, len(rows), batch_size):
        # fine-tuning's --shorten-method truncate cuts a pair at the model's positions: the same here
        tokens = [hub.encode(a, *([b] if b is not None else []))[:limit] for a, b, _ in rows[start:start + batch_size]]
        with torch.no_grad():
            scores = hub.predict(HEAD, collate_tokens(tokens, pad_idx=hub.src_dict.pad()), return_logits=True)
        if scores.size(-1) == 1:
            out += [f"{s:.6g}" for s in scores[:, 0].tolist()]
        else:
            out += [labels.string([i + labels.nspecial]) for i in scores.argmax(-1).tolist()]
    return out


def score(task, said, rows):
    if task.labels is None:  # STS-B: Pearson's r over the rows
        x = torch.tensor([float(s) for s in said], dtype=torch.float64)
        y = torch.tensor([float(label) for *_, label in rows], dtype=torch.float64)
        return f"pearson {100 * torch.corrcoef(torch.stack([x, y]))[0, 1].item():.2f}"
    right = sum(s == label for s, (*_, label) in zip(said, rows))
    return f"accuracy {100 * right / len(rows):.2f} ({right} of {len(rows)})"


def run(a):
    task = TASKS[a.task]
    path = os.path.join(a.glue_dir, f"{a.split}.tsv")
    if not os.path.isfile(path):
        raise BadInput(f"{path}: not found (--glue-dir and --split name the labelled TSV)")
    rows, _ = read_glue_tsv(path, task)
    if not rows:
        raise BadInput(f"{path}: no rows")
    for f in (a.checkpoint, os.path.join(a.data, "meta.json")):
        if not os.path.isfile(f):
            raise BadInput(f"{f}: not found (--checkpoint: a finetune_glue.sh checkpoint; --data: its prepare_glue.py "
                           "output)")
    hub = UniLMv2Model.from_pretrained(os.path.dirname(os.path.abspath(a.checkpoint)),
                                       checkpoint_file=os.path.basename(a.checkpoint), data_name_or_path=a.data)
    if HEAD not in hub.model.classification_heads:
        raise BadInput(f"{a.checkpoint}: no {HEAD} (not a finetune_glue.sh checkpoint)")
    hub.eval()
    if torch.cuda.is_available() and not a.cpu:  # as predict_squad.py; hub.predict moves each batch there
        hub.cuda()
    said = predictions(hub, rows, a.batch_size)
    if a.out:  # whole or not at all (a Ctrl-C or a full disk leaves no half file)
        lines = ["index\tprediction\tlabel\n"] + [f"{i}\t{s}\t{label}\n" for i, (s, (*_, label)) in
                                                   enumerate(zip(said, rows))]
        write_atomically(a.out, lambda f: f.write("".join(lines).encode("utf-8")))
    print(f"predict_glue: {task.name} {path}: {score(task, said, rows)}")  # as finetune_glue's lines


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="finetune_glue.sh's checkpoint_best.pt (or another)")
    p.add_argument("--data", required=True,
                   help="the task as prepare_glue.py binarized it (its dictionaries, tokenizer)")
    p.add_argument("--glue-dir", required=True, help="the task's folder of TSV files")
    p.add_argument("--task", required=True, choices=sorted(TASKS))
    p.add_argument("--split", default="dev", help="the TSV file's name without .tsv (default: %(default)s)")
    p.add_argument("--out", help="write index, prediction, label per row here")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--cpu", action="store_true", help="predict on the CPU where a GPU is available")
    a = p.parse_args(argv)
    return one_line_exit(PROG, lambda: run(a))


if __name__ == "__main__":
    sys.exit(main())
