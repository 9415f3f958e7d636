"""Print "NAME==VERSION deps|nodeps" for each line of requirements.txt that this python lacks at
any version (torch and the lines marked dev aside): what scripts/setup_env.sh installs from a
folder of wheels on a machine that keeps its own packages."""
import importlib.metadata
import re
import sys

for line in open(sys.argv[1]):
    spec = line.split("#")[0].strip()
    if not spec or re.search(r"#\s*dev\b", line) or spec.startswith("torch=="):
        continue
    try:
        importlib.metadata.version(re.split(r"[=<>!~ ;\[]", spec)[0])
    except importlib.metadata.PackageNotFoundError:
        print(spec, "nodeps" if re.search(r"#\s*no-deps", line) else "deps")
