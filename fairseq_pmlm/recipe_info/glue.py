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


def glue_report(log, task, metric):
    """The dev results of the epoch with the best value of the task's metric, per dev set, from
    a ``--log-format json`` fairseq-train log; one line each."""
    shown = GLUE_SHOWN.get(metric, [metric])
    best = {}
    with open(log, encoding="utf-8") as f:
        for line in f:
            m = re.search(r"\| (valid\w*) \| (\{.*\})$", line.strip())
            if m:
                subset, rec = m.group(1), json.loads(m.group(2))
                values = {k: float(rec[f"{subset}_{k}"]) for k in shown if f"{subset}_{k}" in rec}
                if metric in values and values[metric] > best.get(subset, {}).get(metric, float("-inf")):
                    best[subset] = dict(values, epoch=int(rec["epoch"]))
    if not best:
        raise ValueError(f"no dev {metric} in {log}")
    return [f"finetune_glue: {task} {subset} (best epoch {v.pop('epoch')}): "
            + ", ".join(f"{k} {x:.2f}" for k, x in v.items()) for subset, v in best.items()]
