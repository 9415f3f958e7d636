"""What ``--help`` prints for the Python command lines: their description comes from the module's
docstring, and a piece of it must not stop mid-sentence (the first line of a wrapped paragraph
printed "... -> the binarized layout of" and nothing after it)."""
import ast
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_files():
    for top in ("scripts", "fairseq_pmlm"):
        for root, _, files in os.walk(os.path.join(REPO, top)):
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(root, name)


def docstring_descriptions(path):
    """(line, text) of each ArgumentParser description taken from the module docstring: the whole
    docstring, or ``__doc__.split(SEP)[0]``."""
    tree = ast.parse(open(path).read())
    doc = ast.get_docstring(tree, clean=False) or ""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                == "ArgumentParser"):
            continue
        for kw in node.keywords:
            v = kw.value
            if kw.arg != "description":
                continue
            if isinstance(v, ast.Name) and v.id == "__doc__":
                yield node.lineno, doc
            elif (isinstance(v, ast.Subscript) and isinstance(v.value, ast.Call)
                  and getattr(v.value.func, "attr", None) == "split"
                  and isinstance(getattr(v.value.func, "value", None), ast.Name)
                  and v.value.func.value.id == "__doc__"):
                sep = ast.literal_eval(v.value.args[0])
                yield node.lineno, doc.split(sep)[ast.literal_eval(v.slice)]


def test_help_descriptions_taken_from_a_docstring_end_a_sentence():
    seen, cut = 0, []
    for path in python_files():
        doc = ast.get_docstring(ast.parse(open(path).read()), clean=False) or ""
        for line, text in docstring_descriptions(path):
            seen += 1
            if text != doc and not text.rstrip().endswith("."):  # the whole docstring, or whole sentences
                cut.append(f"{os.path.relpath(path, REPO)}:{line}: ...{text.rstrip()[-50:]!r}")
    assert seen > 10
    assert not cut, "--help would print a description cut mid-sentence:\n" + "\n".join(cut)
