#!/usr/bin/env python
"""Score hypotheses against references, one example a line in each file: ROUGE-1/2/L/Lsum F1
(the plugin's ``rouge`` scorer, backed by ``rouge-score``), and with ``--bleu`` corpus BLEU-4
(sacrebleu) as used for question generation. Several ``--hyp`` files (systems) against one
``--ref`` file give one markdown table row each; ``--bootstrap`` adds, for every other system,
a paired bootstrap interval of its ROUGE-L difference from the first one (is a gap larger than
what resampling the test set moves?), and ``--examples N --source FILE`` prints N examples:
source start, reference, each system's output.

    python scripts/score.py --hyp hyp.txt [--hyp other.txt --name a --name b] --ref test.target [--bleu]
        [--bootstrap] [--examples 3 --source test.source]
"""
import argparse
import sys


def fail(message):
    """One line on stderr and exit status 2, as every recipe stops."""
    print(f"score.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_lines(path):
    """The lines of a UTF-8 text file, split at newlines only (a CRLF's \\r is dropped), so that
    line N is the Nth example as the recipes count them (a last line without newline counts)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    out = []
    for n, line in enumerate(lines, 1):
        try:
            out.append(line.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as e:
            fail(f"{path} line {n}: not UTF-8 text (byte {line[e.start]:#04x} at byte {e.start + 1} of the line)")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hyp", action="append", required=True, help="hypothesis file (repeat for several systems)")
    p.add_argument("--name", action="append", help="row name for each --hyp (default: the file name)")
    p.add_argument("--ref", required=True, help="reference file")
    p.add_argument("--bleu", action="store_true", help="also corpus BLEU-4 (sacrebleu, 13a tokenisation)")
    p.add_argument("--no-stemmer", action="store_true", help="ROUGE without Porter stemming")
    p.add_argument("--bootstrap", action="store_true",
                   help="95%% paired bootstrap interval of each system's ROUGE-L difference from the first")
    p.add_argument("--examples", type=int, default=0, help="print this many examples (needs --source)")
    p.add_argument("--source", help="source file, for --examples")
    a = p.parse_args()
    names = a.name or a.hyp
    if len(names) != len(a.hyp):
        p.error("give one --name per --hyp")
    if a.examples and not a.source:
        p.error("--examples needs --source")
    # every file is read and checked before the scorer's (fairseq's) import: errors come at once
    refs = read_lines(a.ref)
    sources = read_lines(a.source) if a.examples else []
    if a.examples and len(sources) != len(refs):
        fail(f"{a.source} has {len(sources)} lines but {a.ref} has {len(refs)}")
    hyp_files = [read_lines(path) for path in a.hyp]
    for path, hyps in zip(a.hyp, hyp_files):
        if len(hyps) != len(refs):
            fail(f"{path} has {len(hyps)} lines but {a.ref} has {len(refs)}")
    from fairseq_pmlm.scoring.rouge import ROUGE_TYPES, rouge_per_example

    header = ["system"] + [t.replace("rouge", "ROUGE-") for t in ROUGE_TYPES] + (["BLEU-4"] if a.bleu else [])
    rows, per_example = [], []
    for name, hyps in zip(names, hyp_files):
        per = rouge_per_example(refs, hyps, use_stemmer=not a.no_stemmer)
        per_example.append(per["rougeL"])
        row = [name] + [f"{sum(per[t]) / max(len(refs), 1):.2f}" for t in ROUGE_TYPES]
        if a.bleu:
            import sacrebleu

            row.append(f"{sacrebleu.corpus_bleu(hyps, [refs]).score:.2f}")
        rows.append(row)
    print(f"{len(refs)} references: {a.ref}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if a.bootstrap:
        for name, scores in zip(names[1:], per_example[1:]):
            mean, lo, hi = paired_bootstrap(per_example[0], scores)
            verdict = "within" if lo <= 0 <= hi else "larger than"
            print(f"ROUGE-L {names[0]} minus {name}: {mean:+.2f} (95% paired bootstrap over the "
                  f"{len(refs)} examples: {lo:+.2f} to {hi:+.2f}: {verdict} the test set's resampling spread)")
    if a.examples:
        for k, i in enumerate(spread(len(refs), a.examples), 1):
            print(f"\nexample {k} (test line {i + 1})\n  source:    {sources[i][:160]}"
                  f"{' ...' if len(sources[i]) > 160 else ''}\n  reference: {refs[i]}")
            for name, hyps in zip(names, hyp_files):
                print(f"  {name}: {hyps[i]}")


def paired_bootstrap(a, b, resamples=1000, seed=0):
    """Mean of a - b and its 2.5/97.5 percentiles over resamples of the examples (with
    replacement; the same examples for both systems, hence paired). a, b: one score an example,
    or [runs x examples] (e.g. seeds): each resample then takes the same examples in every run."""
    import numpy as np

    diff = np.atleast_2d(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
    idx = np.random.default_rng(seed).integers(0, diff.shape[1], size=(resamples, diff.shape[1]))
    means = diff[:, idx].mean(axis=(0, 2))
    return float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def spread(n, k):
    """k line indices spread evenly over n lines (deterministic: the same examples every run)."""
    k = min(k, n)
    return sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(k)})


if __name__ == "__main__":
    main()
