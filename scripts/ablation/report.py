"""The results of an objective ablation (scripts/ablate_objectives.py): results.json's content
from the runs' files, the markdown table and the two plots."""
import json
import os

import numpy as np

from fairseq_pmlm.objectives import objective
from fairseq_pmlm.scoring.score_files import paired_bootstrap

from .inputs import read_json, settings_of

BOOTSTRAP_RESAMPLES = 1000


def collect(a, objectives, seeds):
    """results.json's content from the runs' files."""
    per, cost = {}, {}
    for obj in objectives:
        for seed in seeds:
            run_dir = os.path.join(a.out, "runs", f"{obj}-seed{seed}")
            per[obj, seed] = read_json(os.path.join(run_dir, "generate", "rouge.json"))
            if obj != "none":
                cost[obj, seed] = read_json(os.path.join(run_dir, "pretrain", "done.json"))

    def vs(obj, base):
        if base not in objectives or obj == base:
            return None
        d, lo, hi = paired_bootstrap([per[obj, s]["rougeL"] for s in seeds], [per[base, s]["rougeL"] for s in seeds],
                                     resamples=BOOTSTRAP_RESAMPLES)
        return {"rougeL_diff": round(d, 3), "ci95": [round(lo, 3), round(hi, 3)]}

    def mean_cost(obj, key):
        return float(np.mean([cost[obj, s][key] for s in seeds])) if obj != "none" else 0.0

    rows = []
    for obj in objectives:
        row = {"objective": obj, "seeds": seeds}
        for t in ("rouge1", "rouge2", "rougeL"):
            row[t] = [round(float(np.mean(per[obj, s][t])), 3) for s in seeds]
        row["rougeL_mean"] = round(float(np.mean(row["rougeL"])), 3)
        row["vs_ae"], row["vs_none"] = vs(obj, "ae"), vs(obj, "none")
        row["seconds_per_update"] = round(mean_cost(obj, "seconds_per_update"), 4)
        row["tokens_per_update"] = round(mean_cost(obj, "tokens_per_update"), 1)
        row["pretrain_tokens"] = [cost[obj, s]["tokens"] for s in seeds] if obj != "none" else [0] * len(seeds)
        row["valid"] = [cost[obj, s]["valid"] for s in seeds] if obj != "none" else []
        rows.append(row)
    ae_cost = mean_cost("ae", "seconds_per_update") if "ae" in objectives else 0
    for row in rows:
        row["cost_per_update_vs_ae"] = round(row["seconds_per_update"] / ae_cost, 3) if ae_cost else None
    return {"settings": settings_of(a, objectives, seeds), "test_examples": len(per[objectives[0], seeds[0]]["rougeL"]),
            "objectives": rows}


def spread(values):
    return f"{sum(values) / len(values):.2f} ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 \
        else f"{values[0]:.2f}"


def interval(v):
    if v is None:
        return ""
    d, (lo, hi) = v["rougeL_diff"], v["ci95"]
    return f"{d:+.2f} ({lo:+.2f} to {hi:+.2f}){'' if lo <= 0 <= hi else ' *'}"


def table(results):
    rows = results["objectives"]
    n, seeds = results["test_examples"], rows[0]["seeds"]
    lines = [f"ROUGE F1 (%) on {n} test examples: mean over seeds {','.join(map(str, seeds))} (lowest-highest "
             f"seed); differences pooled over the seeds with a 95% paired bootstrap interval over the examples "
             f"(* : the interval excludes 0); cost: pre-training seconds per update relative to ae; tokens: "
             f"input tokens per pre-training update (context + appended part).", "",
             "| objective | ROUGE-1 | ROUGE-2 | ROUGE-L | ROUGE-L vs ae | ROUGE-L vs none | cost / update vs ae "
             "| tokens / update |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cost, tokens = ("no pre-training", "") if r["objective"] == "none" else (
            f"{r['cost_per_update_vs_ae']:.2f}" if r["cost_per_update_vs_ae"] else f"{r['seconds_per_update']:.2f} s",
            f"{r['tokens_per_update']:.0f}")
        lines.append(f"| {r['objective']} | {spread(r['rouge1'])} | {spread(r['rouge2'])} | {spread(r['rougeL'])} | "
                     f"{interval(r['vs_ae'])} | {interval(r['vs_none'])} | {cost} | {tokens} |")
    return "\n".join(lines) + "\n"


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["objectives"]
    fig, ax = plt.subplots(figsize=(1.2 * len(rows) + 2, 3.6))
    for x, r in enumerate(rows):
        ax.scatter([x] * len(r["rougeL"]), r["rougeL"], color="tab:blue", s=18, zorder=3)
        ax.hlines(r["rougeL_mean"], x - 0.25, x + 0.25, color="black")
    ax.set_xticks(range(len(rows)), [r["objective"] for r in rows])
    ax.set_ylabel("ROUGE-L F1 (%)")
    # two lines: in one, three objectives' width (5.6 in) cut the title off
    ax.set_title(f"fine-tuned after each pre-training objective\n(dots: seeds; bar: mean; "
                 f"{results['test_examples']} test examples)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)


def plot_curves(a, objectives, seeds, path):
    """Held-out loss of the pre-training runs (the AE part where the objective has one, else PAR)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for k, obj in enumerate(o for o in objectives if o != "none"):
        for seed in seeds:
            log = os.path.join(a.out, "runs", f"{obj}-seed{seed}", "pretrain", "train.log")
            points = []
            with open(log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if "| valid | {" in line:
                        r = json.loads(line.split("| valid | ", 1)[1])
                        key = f"valid_{objective(obj).loss_parts[0]}_loss"
                        points.append((int(float(r["valid_num_updates"])), float(r[key])))
            points.sort()
            ax.plot(*zip(*points), color=f"C{k}", alpha=0.7, label=obj if seed == seeds[0] else None,
                    marker=".") if points else None
    ax.set_xlabel("pre-training update")
    ax.set_ylabel("held-out loss (bits a masked token)")
    ax.set_title("pre-training: AE loss (objectives with AE), else PAR loss", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    plt.close(fig)
    os.replace(path + ".tmp.png", path)
