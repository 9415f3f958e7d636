"""The lines of requirements.txt a machine set up from a folder of wheels needs (torch and the lines
marked dev aside), for scripts/setup_env.sh and scripts/fetch_wheels.py. Run, it prints
"NAME==VERSION deps|nodeps" for each that this python lacks at any version: what setup_env.sh
installs from the folder on a machine that keeps its own packages."""
import importlib.metadata
import re
import sys


def requirements(path):
    """[(spec, follow its dependencies?)] of requirements.txt, torch and dev lines aside."""
    out = []
    for line in open(path):
        spec = line.split("#")[0].strip()
        if spec and not re.search(r"#\s*dev\b", line) and not spec.startswith("torch=="):
            out.append((spec, not re.search(r"#\s*no-deps", line)))
    return out


def installed(spec):
    try:
        importlib.metadata.version(re.split(r"[=<>!~ ;\[]", spec)[0])
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


if __name__ == "__main__":
    for spec, deps in requirements(sys.argv[1]):
        if not installed(spec):
            print(spec, "deps" if deps else "nodeps")
