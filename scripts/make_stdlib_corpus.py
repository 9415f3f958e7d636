#!/usr/bin/env python
"""Real-text corpus from the docstrings of the installed Python standard library.

One document per module (its module, class and function docstrings), one sentence per
line, a blank line between documents. Sources are parsed with ``ast``, never imported.
Every k-th document goes to the validation file.

    python scripts/make_stdlib_corpus.py --out train.txt --valid-out valid.txt
"""
import argparse
import ast
import os
import re
import sysconfig

SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "__pycache__", "turtledemo"}
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(])")


def module_sentences(path):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    seen, out = set(), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if not doc:
                continue
            # paragraphs first, so list items and headings do not run into each other
            for para in re.split(r"\n\s*\n", doc):
                for sent in SENTENCE_END.split(" ".join(para.split())):
                    if len(sent.split()) >= 3 and sent not in seen:
                        seen.add(sent)
                        out.append(sent)
    return out


def stdlib_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield os.path.join(dirpath, name)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="training text file to write")
    p.add_argument("--valid-out", help="validation text file to write")
    p.add_argument("--valid-every", type=int, default=50, help="every k-th document goes to --valid-out")
    p.add_argument("--max-docs", type=int, default=0, help="stop after this many documents (0: all)")
    a = p.parse_args()

    root = sysconfig.get_paths()["stdlib"]
    docs = [s for s in map(module_sentences, stdlib_files(root)) if s]
    if a.max_docs:
        docs = docs[: a.max_docs]
    if not docs:
        raise SystemExit(f"error: no docstrings found under {root}")
    outputs = {a.out: [], a.valid_out: []}
    for i, doc in enumerate(docs):
        to_valid = a.valid_out and i % a.valid_every == a.valid_every // 2
        outputs[a.valid_out if to_valid else a.out].append(doc)
    for path, part in outputs.items():
        if not path:
            continue
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for doc in part:
                f.write("\n".join(doc) + "\n\n")
        os.replace(tmp, path)  # nothing half-written
        words = sum(len(s.split()) for d in part for s in d)
        print(f"{path}: {len(part)} documents, {sum(map(len, part))} sentences, {words} words")


if __name__ == "__main__":
    main()
