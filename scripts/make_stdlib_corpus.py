#!/usr/bin/env python
"""Real-text corpus from the docstrings of the installed Python standard library.

One document per module (its module, class and function docstrings, in source order), one
sentence per line, a blank line between documents. Sources are parsed with ``ast``, never
imported (importing can have side effects). Deterministic: files in sorted order, every k-th
document goes to the validation file.

With ``--pairs-out DIR`` it also writes a summarisation set: docstring body -> its first-line
summary, as ``{train,valid,test}.{source,target}``, and ``{split}.lead``, the first sentence
of each body (the lead-1 baseline). Pairs of the training modules go to
train, pairs of the validation modules (never seen in pre-training) alternate valid/test.

    python scripts/make_stdlib_corpus.py --out train.txt --valid-out valid.txt [--pairs-out DIR]
"""
import argparse
import ast
import os
import re
import sysconfig

# tests, the IDLE GUI and demos are not documentation; installed packages are not the stdlib
SKIP_DIRS = {"test", "tests", "idlelib", "turtledemo", "site-packages", "dist-packages", "__pycache__"}
# a sentence ends at . ! or ? followed by whitespace and a capital, a quote or a backquote
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`])")
DOC_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstrings(node):
    """Docstrings of node and of the classes/functions inside it, in source order."""
    if isinstance(node, DOC_NODES):
        doc = ast.get_docstring(node)
        if doc:
            yield doc
    for child in ast.iter_child_nodes(node):
        yield from docstrings(child)


def parse(path):
    try:
        with open(path, "rb") as f:
            return ast.parse(f.read())  # bytes: ast honours the file's coding cookie
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None


def module_pairs(tree):
    """(body, summary) of each docstring whose first paragraph is a one-line summary of
    3-25 words and whose remaining prose has at least 10 words (doctest lines dropped)."""
    out = []
    for doc in docstrings(tree):
        first, *rest = re.split(r"\n\s*\n", doc)
        summary = " ".join(first.split())
        lines = [ln for p in rest for ln in p.splitlines() if not ln.lstrip().startswith((">>>", "..."))]
        body = " ".join(" ".join(lines).split())
        if "\n" not in first.strip() and 3 <= len(summary.split()) <= 25 and len(body.split()) >= 10:
            out.append((body, summary))
    return out


def lead1(text):
    """The first sentence of ``text``: the lead-1 baseline of the summarisation pairs."""
    return SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def module_sentences(tree):
    seen, out = set(), []
    for doc in docstrings(tree):
        # paragraphs first, so headings and list items do not run into the next sentence
        for para in re.split(r"\n\s*\n", doc):
            if para.lstrip().startswith(">>>"):
                continue  # doctest sessions are code, not text
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
    p.add_argument("--valid-fraction", type=float, default=0.02,
                   help="share of the documents that go to --valid-out (every k-th one)")
    p.add_argument("--max-docs", type=int, help="keep only the first N documents")
    p.add_argument("--pairs-out", help="directory for the body -> summary pairs (needs --valid-out)")
    a = p.parse_args()
    if a.valid_out and not 0 < a.valid_fraction < 1:
        p.error("--valid-fraction must be between 0 and 1")
    if a.pairs_out and not a.valid_out:
        p.error("--pairs-out needs --valid-out (its valid/test pairs come from the validation modules)")

    root = sysconfig.get_paths()["stdlib"]
    trees = [t for t in map(parse, stdlib_files(root)) if t is not None]
    modules = [(s, module_pairs(t)) for t, s in ((t, module_sentences(t)) for t in trees) if s]
    if a.max_docs is not None:
        modules = modules[: a.max_docs]
    docs = [s for s, _ in modules]
    if not docs:
        raise SystemExit(f"error: no docstrings found under {root}")
    every = max(2, round(1 / a.valid_fraction)) if a.valid_out else 0
    parts = {a.out: []}
    if a.valid_out:
        parts[a.valid_out] = []
    pairs = {"train": [], "valid": [], "test": []}
    texts = {}  # path -> its whole text
    for i, (doc, doc_pairs) in enumerate(modules):
        # the middle one of each group of k, so valid does not start with the first modules
        to_valid = every and i % every == every // 2
        parts[a.valid_out if to_valid else a.out].append(doc)
        for pair in doc_pairs:
            split = ("valid", "test")[len(pairs["valid"]) > len(pairs["test"])] if to_valid else "train"
            pairs[split].append(pair)
    if a.pairs_out:
        seen = {body for body, _ in pairs["train"]}  # docstrings copied between modules
        pairs["valid"], pairs["test"] = ([p for p in pairs[k] if p[0] not in seen] for k in ("valid", "test"))
        os.makedirs(a.pairs_out, exist_ok=True)
        for split, rows in pairs.items():
            for side, col in (("source", 0), ("target", 1)):
                texts[os.path.join(a.pairs_out, f"{split}.{side}")] = "".join(r[col] + "\n" for r in rows)
            # the extractive baseline every summariser must beat
            texts[os.path.join(a.pairs_out, f"{split}.lead")] = "".join(lead1(r[0]) + "\n" for r in rows)
            print(f"{a.pairs_out}/{split}.{{source,target}}: {len(rows)} pairs")

    for path, part in parts.items():
        words = sum(len(s.split()) for d in part for s in d)
        print(f"{path}: {len(part)} documents, {sum(map(len, part))} sentences, {words} words")
        texts[path] = "".join("\n".join(doc) + "\n\n" for doc in part)
    for path, text in texts.items():  # write everything first, then rename: nothing half-written
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
    for path in texts:
        os.replace(path + ".tmp", path)
    print(f"stdlib {root}: {len(docs)} documents, {sum(map(len, docs))} sentences, "
          f"{sum(len(s.split()) for d in docs for s in d)} words")


if __name__ == "__main__":
    main()
