#!/usr/bin/env python
"""Train a sentencepiece BPE model (optional), then encode text files into space-separated
pieces, one output line per input line: blank lines (document boundaries) stay blank.

    python scripts/spm_encode.py --model M.model [--train-from T.txt --vocab-size 8000] \
        --inputs a.txt b.txt --outputs a.bpe b.bpe
"""
import argparse
import os

import sentencepiece as spm


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="sentencepiece .model (written if --train-from)")
    p.add_argument("--train-from", help="train the model on this text file first")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--outputs", nargs="+", required=True)
    a = p.parse_args()
    if len(a.inputs) != len(a.outputs):
        p.error("--inputs and --outputs differ in length")
    if a.train_from:
        if not a.model.endswith(".model"):
            p.error("--model must end in .model")
        spm.SentencePieceTrainer.train(
            input=a.train_from, model_prefix=a.model[: -len(".model")], vocab_size=a.vocab_size,
            model_type="bpe", character_coverage=1.0,
            input_sentence_size=2_000_000, shuffle_input_sentence=True,  # cap memory on big corpora
            minloglevel=2,
        )
    sp = spm.SentencePieceProcessor(model_file=a.model)
    for src, dst in zip(a.inputs, a.outputs):
        with open(src, encoding="utf-8") as f, open(dst + ".tmp", "w", encoding="utf-8") as out:
            for line in f:
                line = line.strip()
                out.write(" ".join(sp.encode(line, out_type=str)) + "\n" if line else "\n")
        os.replace(dst + ".tmp", dst)


if __name__ == "__main__":
    main()
