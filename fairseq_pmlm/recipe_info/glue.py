"""GLUE facts: the task of a prepare_glue.py output, and the best dev epoch of a run's log."""
import json
import os
import re

GLUE_SHOWN = {"mcc": ["mcc", "accuracy"], "f1": ["f1", "accuracy"], "pearson": ["pearson", "spearman"]}


def glue_meta(data):
    """meta.json of a prepare_glue.py output: (task, training examples, metric, classes)."""
    path = os.path.join(data, "meta.json")
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found: binarize with scripts/glue/prepare_glue.py")
    with open(path) as f:
        m = json.load(f)
    return m["task"], m["train_examples"], m["metric"], m["num_classes"]


def glue_report(log, task, metric, best=None, maximize=True):
    """The dev results of checkpoint_best.pt's epoch, from a ``--log-format json`` fairseq-train log,
    one line per dev set: the epoch where the first dev set (``valid``, the one fairseq's
    ``--best-checkpoint-metric`` reads) has the best value of ``best`` (default: the task's metric;
    highest, or lowest without ``maximize``; the later of equal ones: fairseq's best checkpoint is
    replaced on a tie), the other dev sets (MNLI's mismatched ``valid1``) at that same epoch, not
    at their own best."""
    best = best or metric
    shown = GLUE_SHOWN.get(metric, [metric])
    shown = shown + [best] if best not in shown else shown
    by_epoch, subsets = {}, []  # {epoch: {subset: values}}, the dev sets in log order
    with open(log, encoding="utf-8") as f:
        for line in f:
            m = re.search(r"\| (valid\w*) \| (\{.*\})$", line.strip())
            if m:
                subset, rec = m.group(1), json.loads(m.group(2))
                values = {k: float(rec[f"{subset}_{k}"]) for k in shown if f"{subset}_{k}" in rec}
                if best in values:
                    by_epoch.setdefault(int(rec["epoch"]), {})[subset] = values
                    subsets += [subset] if subset not in subsets else []
    if not subsets:
        raise ValueError(f"no dev {best} in {log}")
    first = subsets[0]
    sign = 1 if maximize else -1
    epoch = max((e for e in by_epoch if first in by_epoch[e]), key=lambda e: (sign * by_epoch[e][first][best], e))
    lines = []
    for subset in subsets:
        values = by_epoch[epoch].get(subset)
        how = f"best epoch {epoch}" if subset == first else f"epoch {epoch}, the best on {first}"
        if values is not None:
            shown_values = ", ".join(f"{k} {x:.2f}" for k, x in values.items())
            lines.append(f"finetune_glue: {task} {subset} ({how}): {shown_values}")
    return lines
