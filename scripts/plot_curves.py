#!/usr/bin/env python
"""Summarise and plot a ``fairseq-train --log-format json`` log of the ``pmlm`` criterion.

Prints how AE and PAR loss/accuracy moved from the first to the last logged update (train
and validation) and writes a PNG of the curves.

    python scripts/plot_curves.py train.log --out curves.png
"""
import argparse
import json
import os

METRICS = ("ae_loss", "par_loss", "ae_acc", "par_acc")


def read_log(path):
    """(train_inner records, valid records) parsed from fairseq's json log lines."""
    train, valid = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            for tag, out in (("| train_inner |", train), ("| valid |", valid)):
                if tag in line:
                    out.append(json.loads(line.split(tag, 1)[1]))
    return train, valid


def value(rec, key, prefix=""):
    v = rec.get(prefix + key)
    return None if v is None else float(v)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("log", help="fairseq-train log written with --log-format json")
    p.add_argument("--out", required=True, help="PNG file to write")
    a = p.parse_args()
    if not os.path.isfile(a.log):
        p.error(f"log not found: {a.log}")  # exit status 2, as every command on bad input
    train, valid = read_log(a.log)
    if len(train) < 2:
        p.error(f"{a.log} has fewer than 2 train_inner records (use --log-format json)")
    keys = [k for k in METRICS if k in train[0]]

    head = f"{'metric':<10} {'first':>9} {'last':>9}"
    print(f"{head}   (train, updates {train[0]['num_updates']} -> {train[-1]['num_updates']})")
    for k in keys:
        print(f"{k:<10} {value(train[0], k):>9.3f} {value(train[-1], k):>9.3f}")
    if len(valid) >= 2:
        print(f"{head}   (valid, updates {valid[0]['valid_num_updates']} -> {valid[-1]['valid_num_updates']})")
        for k in keys:
            if ("valid_" + k) in valid[0]:
                print(f"{k:<10} {value(valid[0], k, 'valid_'):>9.3f} {value(valid[-1], k, 'valid_'):>9.3f}")
    print("(losses in bits per token, as fairseq logs them; accuracies in %)")

    try:
        import matplotlib
    except ImportError:
        from fairseq_pmlm.errors import exit_with_error  # imported here: the package costs ~3 s
        from fairseq_pmlm.optional_packages import missing

        exit_with_error("plot_curves.py", missing("matplotlib", "the plot"))
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    steps = [int(r["num_updates"]) for r in train]
    vsteps = [int(r["valid_num_updates"]) for r in valid]
    for k, ax in (("ae_loss", ax_loss), ("par_loss", ax_loss), ("ae_acc", ax_acc), ("par_acc", ax_acc)):
        if k not in keys:
            continue
        line, = ax.plot(steps, [value(r, k) for r in train], label=f"train {k}")
        if valid and ("valid_" + k) in valid[0]:
            ax.plot(vsteps, [value(r, k, "valid_") for r in valid], "o--", color=line.get_color(), label=f"valid {k}")
    ax_loss.set(xlabel="update", ylabel="loss (bits/token)", title="AE and PAR loss")
    ax_acc.set(xlabel="update", ylabel="accuracy (%)", title="AE and PAR accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    tmp = a.out + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, a.out)  # nothing half-written
    print(f"plot: {a.out}")


if __name__ == "__main__":
    main()
