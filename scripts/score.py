#!/usr/bin/env python
"""Score hypotheses against references, one example a line in each file: ROUGE-1/2/L/Lsum F1
(the plugin's ``rouge`` scorer, backed by ``rouge-score``), and with ``--bleu`` corpus BLEU-4
(sacrebleu) as used for question generation. Several ``--hyp`` files (systems) against one
``--ref`` file give one markdown table row each.

    python scripts/score.py --hyp hyp.txt [--hyp other.txt --name a --name b] --ref test.target [--bleu]
"""
import argparse
import sys


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    except OSError as e:
        sys.exit(f"score.py: error: cannot read {path}: {e.strerror}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hyp", action="append", required=True, help="hypothesis file (repeat for several systems)")
    p.add_argument("--name", action="append", help="row name for each --hyp (default: the file name)")
    p.add_argument("--ref", required=True, help="reference file")
    p.add_argument("--bleu", action="store_true", help="also corpus BLEU-4 (sacrebleu, 13a tokenisation)")
    p.add_argument("--no-stemmer", action="store_true", help="ROUGE without Porter stemming")
    a = p.parse_args()
    names = a.name or a.hyp
    if len(names) != len(a.hyp):
        p.error("give one --name per --hyp")
    from fairseq_pmlm.scoring.rouge import ROUGE_TYPES, rouge_scores

    refs = read_lines(a.ref)
    header = ["system"] + [t.replace("rouge", "ROUGE-") for t in ROUGE_TYPES] + (["BLEU-4"] if a.bleu else [])
    rows = []
    for name, path in zip(names, a.hyp):
        hyps = read_lines(path)
        if len(hyps) != len(refs):
            sys.exit(f"score.py: error: {path} has {len(hyps)} lines but {a.ref} has {len(refs)}")
        s = rouge_scores(refs, hyps, use_stemmer=not a.no_stemmer)
        row = [name] + [f"{s[t]:.2f}" for t in ROUGE_TYPES]
        if a.bleu:
            import sacrebleu

            row.append(f"{sacrebleu.corpus_bleu(hyps, [refs]).score:.2f}")
        rows.append(row)
    print(f"{len(refs)} references: {a.ref}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
