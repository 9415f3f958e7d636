"""Score hypotheses against references, one example a line in each file: ROUGE-1/2/L/Lsum F1
(the plugin's ``rouge`` scorer, backed by ``rouge-score``), and with ``--bleu`` corpus BLEU-4
(sacrebleu) as used for question generation. Several ``--hyp`` files (systems) against one
``--ref`` file give one markdown table row each; ``--bootstrap`` adds, for every other system,
a paired bootstrap interval of its ROUGE-L difference from the first one (is a gap larger than
what resampling the test set moves?), and ``--examples N --source FILE`` prints N examples:
source start, reference, each system's output.

Multi-sentence summaries (``summaries.py``): a line's sentences are separated by
``[X_SEP]`` (or s2s-ft's `` <S_SEP> ``); a file named ``*.sentences`` holds one sentence a line
and a blank line after each example. ROUGE-Lsum is the summary-level LCS over the sentences.
``--preset cnndm|xsum`` scores as the papers did: ROUGE-1.5.5's tokens and stemmer (the exception
lists too), ROUGE-Lsum the headline ROUGE-L. ``--style s2s-ft`` first post-processes each
hypothesis as Microsoft's s2s-ft evaluation does (CNN/DailyMail: PTB re-tokenisation, sentences of
<= 4 tokens and repeated sentences dropped, 60 tokens kept); ``--style both`` prints both rows.
``--perl`` runs ROUGE-1.5.5 itself as well (needs perl and libxml-parser-perl).

    python scripts/score.py --hyp hyp.txt [--hyp other.txt --name a --name b] --ref test.target [--bleu]
        [--bootstrap] [--examples 3 --source test.source]
    python scripts/score.py --preset cnndm --hyp hyp.txt --ref test.target [--style both] [--perl]
"""
import argparse

import numpy as np

from ..errors import BadInput, exit_with_error
from ..text.lines import read_lines as lines_of
from . import rouge155, summaries

PROG = "score.py"


def read_lines(path):
    """The lines of a UTF-8 text file as every command counts them (``text/lines.py``:
    line N is the Nth example, a last line without newline counts); errors are one line."""
    try:
        return lines_of(path)
    except OSError as e:
        exit_with_error(PROG, f"cannot read {path}: {e.strerror}")
    except BadInput as e:
        exit_with_error(PROG, str(e))


def read_examples(path):
    """Examples of a file: its lines, or for ``*.sentences`` its blocks of sentence lines."""
    lines = read_lines(path)
    if not path.endswith(".sentences"):
        return lines
    return summaries.parse_sentence_blocks(lines)


def shown(example):
    return example if isinstance(example, str) else " [X_SEP] ".join(example)


def main(argv=None):
    p = argparse.ArgumentParser(prog="score.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--hyp", action="append", required=True, help="hypothesis file (repeat for several systems)")
    p.add_argument("--name", action="append", help="row name for each --hyp (default: the file name)")
    p.add_argument("--ref", required=True, help="reference file")
    p.add_argument("--bleu", action="store_true", help="also corpus BLEU-4 (sacrebleu, 13a tokenisation)")
    p.add_argument("--no-stemmer", action="store_true", help="ROUGE without Porter stemming")
    p.add_argument("--preset", choices=["cnndm", "xsum"],
                   help="score as the papers did: ROUGE-1.5.5's tokens and stemmer, summary-level ROUGE-L")
    p.add_argument("--tokenizer", choices=["rouge-score", "rouge155"],
                   help="ROUGE's tokens and stemmer (default: rouge155 with --preset, else rouge-score)")
    p.add_argument("--style", choices=["plain", "s2s-ft", "both"], default="plain",
                   help="s2s-ft: post-process hypotheses as s2s-ft's evaluation does (needs --preset); both: two rows")
    p.add_argument("--trunc-len", type=int,
                   help="s2s-ft style: tokens kept per hypothesis (s2s-ft's default: 60 for cnndm, all for xsum)")
    p.add_argument("--duplicate-rate", type=float, default=0.7,
                   help="s2s-ft style, cnndm: drop a sentence more than this share of whose words came before")
    p.add_argument("--perl", action="store_true", help="also ROUGE-1.5.5 itself (perl, libxml-parser-perl)")
    p.add_argument("--bootstrap", action="store_true",
                   help="95%% paired bootstrap interval of each system's ROUGE-L difference from the first")
    p.add_argument("--examples", type=int, default=0, help="print this many examples (needs --source)")
    p.add_argument("--source", help="source file, for --examples")
    a = p.parse_args(argv)
    names = a.name or a.hyp
    if len(names) != len(a.hyp):
        p.error("give one --name per --hyp")
    if a.examples and not a.source:
        p.error("--examples needs --source")
    if a.style != "plain" and not a.preset:
        p.error("--style s2s-ft needs --preset cnndm or xsum (the post-processing differs)")
    if a.trunc_len is not None and a.trunc_len < 0:
        p.error("--trunc-len must be 0 (no truncation) or more")
    # every file is read and checked before any is scored: errors come at once
    refs = read_examples(a.ref)
    if not refs:  # a mean over no example is no score (it printed 0.00)
        exit_with_error(PROG, f"{a.ref} holds no example (an empty file): nothing to score")
    sources = read_lines(a.source) if a.examples else []
    if a.examples and len(sources) != len(refs):
        exit_with_error(PROG, f"{a.source} has {len(sources)} lines but {a.ref} has {len(refs)}")
    hyp_files = [read_examples(path) for path in a.hyp]
    for path, hyps in zip(a.hyp, hyp_files):
        if len(hyps) != len(refs):
            exit_with_error(PROG, f"{path} has {len(hyps)} examples but {a.ref} has {len(refs)}")
    if a.perl and rouge155.perl_missing():
        exit_with_error(PROG, f"--perl: {rouge155.perl_missing()}")
    tokenizer = a.tokenizer or ("rouge155" if a.preset else "rouge-score")
    headline = "rougeLsum" if a.preset else "rougeL"  # the number the papers' tables call ROUGE-L
    header = ["system"] + [t.replace("rouge", "ROUGE-") for t in summaries.ROUGE_TYPES] + (["BLEU-4"] if a.bleu else [])
    styles = {"plain": ["plain"], "s2s-ft": ["s2s-ft"], "both": ["plain", "s2s-ft"]}[a.style]
    ref_sents = [summaries.as_sentences(r) for r in refs]
    rows, row_names, per_example, perl_rows = [], [], [], []
    for name, hyps in zip(names, hyp_files):
        for style in styles:
            if style == "s2s-ft":
                hyp_sents = [summaries.s2sft_hypothesis(shown(h), a.preset, a.trunc_len, a.duplicate_rate)
                             for h in hyps]
                name_shown = f"{name} (s2s-ft post-processing)" if a.style == "both" else name
            else:
                hyp_sents, name_shown = [summaries.as_sentences(h) for h in hyps], name
            per = summaries.rouge_per_example(ref_sents, hyp_sents, not a.no_stemmer, tokenizer)
            per_example.append(per[headline])
            row = [name_shown] + [f"{sum(per[t]) / max(len(refs), 1):.2f}" for t in summaries.ROUGE_TYPES]
            if a.bleu:
                import sacrebleu

                row.append(f"{sacrebleu.corpus_bleu([shown(h) for h in hyps], [[shown(r) for r in refs]]).score:.2f}")
            rows.append(row)
            row_names.append(name_shown)
            if a.perl:
                perl = rouge155.run_perl(ref_sents, hyp_sents, stem=not a.no_stemmer)
                perl_rows.append([name_shown] + [f"{sum(perl[t]) / max(len(refs), 1):.2f}"
                                                 for t in ("rouge1", "rouge2", "rougeLsum")])
    print(f"{len(refs)} references: {a.ref}")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if a.preset:
        print(f"({a.preset}: ROUGE-Lsum is the summary-level ROUGE-L over the sentences, the RG-L of the papers' "
              f"tables; tokens and stemmer as ROUGE-1.5.5 counts them)")
    if perl_rows:
        print("\nROUGE-1.5.5 itself (the mean of its per-example F1; ROUGE-L is its summary-level LCS):")
        print("| system | ROUGE-1 | ROUGE-2 | ROUGE-L |\n|---|---|---|---|")
        for row in perl_rows:
            print("| " + " | ".join(row) + " |")
    if a.bootstrap:
        label = "ROUGE-Lsum" if headline == "rougeLsum" else "ROUGE-L"
        for name, scores in zip(row_names[1:], per_example[1:]):
            mean, lo, hi = paired_bootstrap(per_example[0], scores)
            verdict = "within" if lo <= 0 <= hi else "larger than"
            print(f"{label} {row_names[0]} minus {name}: {mean:+.2f} (95% paired bootstrap over the "
                  f"{len(refs)} examples: {lo:+.2f} to {hi:+.2f}: {verdict} the test set's resampling spread)")
    if a.examples:
        for k, i in enumerate(spread(len(refs), a.examples), 1):
            print(f"\nexample {k} (test line {i + 1})\n  source:    {sources[i][:160]}"
                  f"{' ...' if len(sources[i]) > 160 else ''}\n  reference: {shown(refs[i])}")
            for name, hyps in zip(names, hyp_files):
                print(f"  {name}: {shown(hyps[i])}")


def paired_bootstrap(a, b, resamples=1000, seed=0):
    """Mean of a - b and its 2.5/97.5 percentiles over resamples of the examples (with
    replacement; the same examples for both systems, hence paired). a, b: one score an example,
    or [runs x examples] (e.g. seeds): each resample then takes the same examples in every run."""
    diff = np.atleast_2d(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))
    idx = np.random.default_rng(seed).integers(0, diff.shape[1], size=(resamples, diff.shape[1]))
    means = diff[:, idx].mean(axis=(0, 2))
    return float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def spread(n, k):
    """k line indices spread evenly over n lines (deterministic: the same examples every run)."""
    k = min(k, n)
    return sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(k)})
