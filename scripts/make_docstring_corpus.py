#!/usr/bin/env python
"""Real text every machine here has: the docstrings of the Python standard library and of
the packages the set-up pins (torch, transformers, scikit-learn, numpy, matplotlib, fairseq).

Two things are written, from modules split once and for all into training and held-out ones
(every k-th module in sorted order is held out; sources are parsed with ``ast``, never imported):

- a pre-training corpus, ``pretrain.{train,valid}.txt``: one document per module, one sentence a
  line, a blank line between documents. Each docstring contributes its object's heading, then
  its sentences (doctest sessions dropped);
- a summarisation set, ``pairs/{train,valid,test}.{source,target,lead}``: the object's heading
  and its docstring body -> the docstring's one-line summary; ``lead`` is the first sentence of
  the source, the lead-1 baseline. Held-out modules' pairs alternate valid/test; a held-out pair
  whose body or summary also stands in a training module (docstrings are copied between
  modules and packages) is dropped, so nothing of it was seen in any training stage.

A heading names the documented object in words: the uncased WordPiece vocabulary of released
BERT models cuts ``DuplicateSectionError`` into meaningless pieces, ``Duplicate Section Error``
into words. Without it the summary line is often unknowable from the body::

    add_section(self, section) in class RawConfigParser, body "Raise DuplicateSectionError if ..."
    -> source  "Raw Config Parser . add section (section): Raise DuplicateSectionError if ..."
       target  "Create a new section in the configuration."

    python scripts/make_docstring_corpus.py --out DIR [--packages torch,numpy] [--held-out-every 20]
"""
import argparse
import ast
import importlib.metadata
import importlib.util
import os
import re
import sys
import sysconfig
from concurrent.futures import ProcessPoolExecutor

# the pinned packages with the most prose in their docstrings (requirements.txt pins each one,
# so every machine builds the same corpus); "stdlib" is Python's standard library
DEFAULT_PACKAGES = ("stdlib", "torch", "transformers", "sklearn", "numpy", "matplotlib", "fairseq")
DISTRIBUTIONS = {"sklearn": "scikit-learn", "fairseq": "ve-fairseq"}
# tests, vendored copies, the IDLE GUI and demos are not documentation
SKIP_DIRS = {"test", "tests", "testing", "_vendor", "idlelib", "turtledemo", "site-packages", "dist-packages",
             "__pycache__"}
# a sentence ends at . ! or ? followed by whitespace and a capital, a quote or a backquote
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`])")
# a summary of 3-25 words on one line, and a body of at least 10 words
SUMMARY_WORDS, BODY_WORDS = (3, 25), 10


def words(identifier):
    """``RawConfigParser`` -> ``Raw Config Parser``, ``add_section`` -> ``add section``."""
    split = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", identifier)
    return " ".join(split.replace("_", " ").split())


def signature(node):
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args] + ([args.vararg.arg] if args.vararg else [])
    names += [a.arg for a in args.kwonlyargs] + ([args.kwarg.arg] if args.kwarg else [])
    return ", ".join(words(n) for n in names if n not in ("self", "cls"))


def headed_docstrings(tree, module_name):
    """(heading, docstring) of the module and of every class and function inside it, in source
    order. Methods are headed with their class: ``Raw Config Parser . add section (section)``."""
    def walk(node, owner):
        if isinstance(node, ast.ClassDef):
            heading, owner_here = f"class {words(node.name)}", words(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            heading = f"{words(node.name)} ({signature(node)})"
            heading, owner_here = (f"{owner} . {heading}" if owner else heading), None
        else:
            heading, owner_here = f"module {module_name}", None
        doc = ast.get_docstring(node)
        if doc:
            yield heading, doc
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, owner_here)

    yield from walk(tree, None)


def parse(path):
    try:
        with open(path, "rb") as f:
            return ast.parse(f.read())  # bytes: ast honours the file's coding cookie
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return None


def lead1(text):
    """The first sentence of ``text``: the lead-1 baseline of the summarisation pairs."""
    return SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def is_doctest(line):
    return line.lstrip().startswith((">>>", "..."))


def split_docstring(doc):
    """(summary, body, paragraphs): the first paragraph if it is one line, the prose after it on
    one line, and the paragraphs of the whole docstring; doctest lines are dropped (code, not text)."""
    paragraphs = ["\n".join(ln for ln in p.splitlines() if not is_doctest(ln)) for p in re.split(r"\n\s*\n", doc)]
    first, rest = paragraphs[0], paragraphs[1:]
    summary = " ".join(first.split()) if "\n" not in first.strip() else ""
    return summary, " ".join(" ".join(rest).split()), paragraphs


def module_text(tree, module_name):
    """-> (pairs, sentences) of one module: ``pairs`` = [(heading: body, summary)] of the
    docstrings with a one-line summary of 3-25 words and a body of at least 10 words;
    ``sentences`` = its pre-training document (headings and docstring sentences)."""
    pairs, sentences, seen = [], [], set()
    for heading, doc in headed_docstrings(tree, module_name):
        summary, body, paragraphs = split_docstring(doc)
        lo, hi = SUMMARY_WORDS
        if summary and lo <= len(summary.split()) <= hi and len(body.split()) >= BODY_WORDS:
            pairs.append((f"{heading}: {body}", summary))
        sentences.append(heading + ":")
        # paragraphs first, so headings and list items do not run into the next sentence
        for para in paragraphs:
            for sent in SENTENCE_END.split(" ".join(para.split())):
                if len(sent.split()) >= 3 and sent not in seen:
                    seen.add(sent)
                    sentences.append(sent)
    return pairs, sentences


def package_modules(package):
    """[(module name, path)] of a package's .py files (``stdlib``: the standard library), sorted."""
    if package == "stdlib":
        root, prefix = sysconfig.get_paths()["stdlib"], ""
    else:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"package {package!r} is not installed")
        root, prefix = list(spec.submodule_search_locations)[0], package + "."
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, name), root)[:-3].replace(os.sep, ".")
                out.append((prefix + re.sub(r"(^|\.)__init__$", "", rel), os.path.join(dirpath, name)))
    return out


def read_module(item):
    name, path = item
    tree = parse(path)
    return module_text(tree, name or "__main__") if tree is not None else ([], [])


def version_of(package):
    if package == "stdlib":
        return "Python " + sys.version.split()[0]
    try:
        return f"{package} {importlib.metadata.version(DISTRIBUTIONS.get(package, package))}"
    except importlib.metadata.PackageNotFoundError:
        return package


def key(text):
    return " ".join(text.lower().split())


def build(modules, held_out_every, max_valid_words=None):
    """``modules``: [(pairs, sentences)] in order -> (documents {train, valid}, pairs {train,
    valid, test}). Every ``held_out_every``-th module (the middle one of each group) is held out;
    the held-out documents stop at ``max_valid_words`` (they only measure pre-training)."""
    docs = {"train": [], "valid": []}
    pairs = {"train": [], "valid": [], "test": []}
    held, valid_words = [], 0
    for i, (module_pairs, sentences) in enumerate(modules):
        to_valid = i % held_out_every == held_out_every // 2
        if sentences and not to_valid:
            docs["train"].append(sentences)
        elif sentences and (max_valid_words is None or valid_words < max_valid_words):
            docs["valid"].append(sentences)
            valid_words += sum(len(s.split()) for s in sentences)
        (held if to_valid else pairs["train"]).extend(module_pairs)
    # training pairs once each; held-out pairs only if nothing of them stands in a training module
    seen_train = set()
    pairs["train"] = [p for p in pairs["train"] if not (key(p[0]) in seen_train or seen_train.add(key(p[0])))]
    training_text = {key(s) for doc in docs["train"] for s in doc}
    training_text |= {key(src.split(": ", 1)[1]) for src, _ in pairs["train"]}
    seen_held = set()
    for src, summary in held:
        body = key(src.split(": ", 1)[1])
        if body in training_text or key(summary) in training_text or body in seen_held:
            continue
        seen_held.add(body)
        pairs[("valid", "test")[len(pairs["valid"]) > len(pairs["test"])]].append((src, summary))
    return docs, pairs


def write_all(texts):
    """Write every file, then rename them into place: nothing half-written."""
    for path, text in texts.items():
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
    for path in texts:
        os.replace(path + ".tmp", path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--packages", default=",".join(DEFAULT_PACKAGES),
                   help="comma-separated importable packages ('stdlib' = the standard library); default: %(default)s")
    p.add_argument("--held-out-every", type=int, default=20, metavar="K",
                   help="every K-th module is held out (valid/test) (default: %(default)s)")
    p.add_argument("--max-valid-words", type=int, default=50000,
                   help="held-out pre-training text: stop after this many words (default: %(default)s)")
    p.add_argument("--max-modules", type=int, help="keep only the first N modules of each package (tests)")
    p.add_argument("--workers", type=int, default=2, help="parsing processes (default: %(default)s)")
    a = p.parse_args(argv)
    if a.held_out_every < 2:
        p.error("--held-out-every must be at least 2")
    packages = [s for s in a.packages.split(",") if s]
    items = []
    for package in packages:
        try:
            items += package_modules(package)[: a.max_modules]
        except ValueError as e:
            p.error(str(e))
    with ProcessPoolExecutor(max(1, a.workers)) as pool:
        modules = list(pool.map(read_module, items, chunksize=16))
    docs, pairs = build(modules, a.held_out_every, a.max_valid_words)
    if not docs["train"] or not pairs["train"]:
        p.error(f"no docstrings found in {', '.join(packages)}")
    texts = {}
    for split, documents in docs.items():
        texts[os.path.join(a.out, f"pretrain.{split}.txt")] = "".join("\n".join(d) + "\n\n" for d in documents)
        n_words = sum(len(s.split()) for d in documents for s in d)
        print(f"{a.out}/pretrain.{split}.txt: {len(documents)} modules, {n_words} words")
    for split, rows in pairs.items():
        for ext, column in (("source", [s for s, _ in rows]), ("target", [t for _, t in rows]),
                            ("lead", [lead1(s) for s, _ in rows])):
            texts[os.path.join(a.out, "pairs", f"{split}.{ext}")] = "".join(c + "\n" for c in column)
        print(f"{a.out}/pairs/{split}.{{source,target,lead}}: {len(rows)} pairs")
    write_all(texts)
    print(f"docstrings of {', '.join(version_of(p) for p in packages)}: {len(items)} modules")


if __name__ == "__main__":
    main()
