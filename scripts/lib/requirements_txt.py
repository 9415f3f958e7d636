"""The one reader of requirements.txt, for scripts/setup_env.sh and scripts/fetch_wheels.py.

A line is ``NAME==VERSION`` with optional markers in its comment: ``no-deps`` (installed without
its declared dependencies) and ``optional`` (only the main job or the suite needs it: a set-up from
a folder of wheels installs it when the folder has it, and the command that needs it says so in one
line when it is absent). Run, it prints what to install, one ``deps|nodeps|skip SPEC`` a line:

    python requirements_txt.py REQ                 # a package index: every line (torch first)
    python requirements_txt.py REQ --wheels DIR    # a folder of wheels: what this python lacks, torch
                                                   # aside; an optional line the folder lacks: skip
"""
import importlib.metadata
import os
import re
import sys


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def name_of(spec):
    return norm(re.split(r"[=<>!~ ;\[@(]", spec.strip())[0])


class Requirement:
    def __init__(self, line):
        self.spec = line.split("#")[0].strip()
        comment = line.partition("#")[2]
        self.name = name_of(self.spec)
        self.deps = not re.search(r"\bno-deps\b", comment)
        self.optional = bool(re.search(r"\boptional\b", comment))


def requirements(path):
    """[Requirement] of requirements.txt, in file order."""
    with open(path) as f:
        return [Requirement(line) for line in f if line.split("#")[0].strip()]


def installed(name):
    try:
        importlib.metadata.version(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def wheel_names(folder):
    """Normalised project names of the wheels in ``folder`` (NAME-VERSION-...whl)."""
    return {norm(f.split("-")[0]) for f in os.listdir(folder) if f.endswith(".whl")}


def plan(path, wheels=None):
    """(how, spec) to install: everything from an index; from a folder, what this python lacks."""
    out = []
    in_folder = wheel_names(wheels) if wheels else set()
    for r in requirements(path):
        how = "deps" if r.deps else "nodeps"
        if wheels is not None:
            if r.name == "torch" or installed(r.name):
                continue
            if r.optional and r.name not in in_folder:
                how = "skip"
        out.append((how, r.spec))
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    wheels = args[args.index("--wheels") + 1] if "--wheels" in args else None
    for how, spec in plan(args[0], wheels):
        print(how, spec)
