"""``bash scripts/bench_gpu.sh --smoke``: the GPU benchmark's own code at tiny sizes on the CPU
(~15 s), so the one-call GPU measurement cannot rot. Checks the table's shape and that its
numbers are consistent with each other (never their values: this machine's speed varies)."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
def output(tmp_path_factory):
    profile = tmp_path_factory.mktemp("profile") / "kernels.md"
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(["bash", "scripts/bench_gpu.sh", "--smoke", "--profile", str(profile)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout, profile.read_text(), proc.stderr


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
    assert ratio(rows[4]) == pytest.approx(seqs[1] / seqs[4], rel=0.06)  # PMLM vs naive (1 decimal)
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
    kernels, totals = tables
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
    assert m and float(m.group(3)) == pytest.approx(100 * float(m.group(1)) / float(m.group(2)), abs=0.06)


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


def test_bench_attention_smoke_prints_the_sdpa_rows_with_the_bias_costing_time(capsys, monkeypatch):
    """``scripts/bench_attention.py --smoke`` (in-process): its SDPA rows on the CPU (flex rows are CUDA-only)."""
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_attention

    bench_attention.main(["--smoke", "--steps", "1"])
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert rows[0] == ["variant", "ms", "ran"] and [r[0][:4] for r in rows[1:]] == ["sdpa"] * 3, out
    assert all(number(r[1]) > 0 and r[2] == "SDPA" for r in rows[1:]), out
