"""The set-up on a machine without a package index that has its own torch (a GPU machine):
``PMLM_WHEELS=DIR scripts/setup_env.sh`` keeps that python's torch, installs from DIR only the
requirements it lacks (dev lines skipped, no-deps lines without their dependencies), and names a
wheel the folder lacks in one line. A copy of the set-up runs against a stand-in "machine": a
python that sees this .venv's packages (torch, fairseq), with made-up requirements."""
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_wheel(tmp, name, requires=()):
    src = tmp / f"src-{name}"
    (src / name.replace("-", "_")).mkdir(parents=True)
    (src / name.replace("-", "_") / "__init__.py").write_text("")
    (src / "setup.py").write_text(
        f"from setuptools import setup\nsetup(name={name!r}, version='1.0', packages=[{name.replace('-', '_')!r}], "
        f"install_requires={list(requires)!r})\n")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp / "wheels"), str(src)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheels")
    # the machine's python: a plain venv that sees this .venv's packages through a .pth
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(tmp / "machine")], check=True)
    site = subprocess.run([str(tmp / "machine/bin/python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "machine.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    repo = tmp / "repo"
    shutil.copytree(os.path.join(REPO, "scripts"), repo / "scripts")
    shutil.copy(os.path.join(REPO, "setup.py"), repo)
    os.symlink(os.path.join(REPO, "fairseq_pmlm"), repo / "fairseq_pmlm")
    (repo / "requirements.txt").write_text(textwrap.dedent("""\
        torch==1.0.0
        ve-fairseq==0.12.3  # no-deps
        pmlm-probe==1.0
        pmlm-probe-nodeps==1.0  # no-deps
        pmlm-probe-dev==1.0  # dev
        """))
    build_wheel(tmp, "pmlm-probe")
    build_wheel(tmp, "pmlm-probe-nodeps", requires=["pmlm-no-such-package"])
    return tmp, repo


def setup_env(repo, wheels, python):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PMLM_WHEELS=str(wheels), PMLM_PYTHON=str(python),
               PATH=os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p))
    return subprocess.run(["bash", "scripts/setup_env.sh"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300)


def test_installs_only_the_missing_requirements_and_keeps_the_machines_torch(machine):
    tmp, repo = machine
    proc = setup_env(repo, tmp / "wheels", tmp / "machine/bin/python")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "missing: pmlm-probe==1.0 pmlm-probe-nodeps==1.0" in proc.stdout, proc.stdout
    out = subprocess.run([str(repo / ".venv/bin/python"), "-c",
                          "import torch, fairseq, fairseq_pmlm, pmlm_probe, pmlm_probe_nodeps, importlib.util as u;"
                          "print(torch.__file__); print(u.find_spec('pmlm_probe_dev'))"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    import torch
    torch_file, dev = out.stdout.split()
    assert torch_file == torch.__file__  # the machine's torch, not a pinned one (the pin names another version)
    assert dev == "None"  # dev lines are the suite's: not installed
    again = setup_env(repo, tmp / "wheels", tmp / "machine/bin/python")
    assert again.returncode == 0 and "installing" not in again.stdout  # set up once


def test_a_wheel_missing_from_the_folder_is_one_line_naming_the_folder(machine, tmp_path):
    tmp, repo = machine
    shutil.rmtree(repo / ".venv", ignore_errors=True)
    (tmp_path / "empty").mkdir()
    proc = setup_env(repo, tmp_path / "empty", tmp / "machine/bin/python")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (f"setup_env: error: {tmp_path / 'empty'} has no wheel of pmlm-probe==1.0 "
                                   "(fill it with scripts/fetch_wheels.py)")
    proc = setup_env(repo, tmp_path / "nowhere", tmp / "machine/bin/python")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"setup_env: error: PMLM_WHEELS={tmp_path / 'nowhere'}: no such directory"


def test_a_python_without_pip_is_one_line_saying_so(machine, tmp_path):
    """It said "has no wheel of one of: ...", blaming the folder."""
    tmp, repo = machine
    shutil.rmtree(repo / ".venv", ignore_errors=True)
    nopip = tmp_path / "nopip" / "site-packages"  # a pip that cannot run, before the one it would see
    (nopip / "pip").mkdir(parents=True)
    (nopip / "pip" / "__init__.py").write_text("raise ImportError('no pip here')\n")
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(tmp_path / "py")], check=True)
    site = subprocess.run([str(tmp_path / "py/bin/python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "machine.pth"), "w") as f:
        f.write(f"{nopip}\n{sysconfig.get_paths()['purelib']}\n")
    proc = setup_env(repo, tmp / "wheels", tmp_path / "py/bin/python")
    assert proc.returncode == 2 and proc.stderr == (
        f"setup_env: error: {tmp_path / 'py/bin/python'} has no pip to install from {tmp / 'wheels'} with: install "
        "it (python3 -m ensurepip, or the python3-pip package) and rerun\n"), proc.stderr


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
    assert proc.returncode != 0 and proc.stderr == f"fetch_wheels.py: error: {expect}\n", proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["file"]
