"""The benchmarks' rows of the Triton kernel (``--attention-impl triton``) on the CPU, where Triton's
interpreter runs it (conftest.py turns it on): slow there (seconds an update), so these end-to-end
runs sit in their own file, which the suite runs beside test_bench_gpu.py."""
import os
import re

from test_bench_gpu import ROWS, number, parse

from cli import REPO, run_script


def test_bench_attention_smoke_prints_the_sdpa_and_the_triton_rows_each_naming_the_path_it_ran(capsys, monkeypatch):
    """``scripts/bench_attention.py --smoke`` (in-process): its SDPA rows, and its Triton kernel rows
    under Triton's interpreter (conftest.py), its rows with attention spelled out, and the blocks
    alone, on the CPU (flex rows are CUDA-only). Each Triton row ran the kernel (and only the kernel's
    rows did), and so did the context block alone's; the spelled-out rows ran no fused kernel."""
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_attention

    bench_attention.main(["--smoke", "--steps", "1"])
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert rows[0] == ["variant", "ms", "ran"] and len(rows) == 1 + 4 + 4 + 6 + 2 + 3, out
    assert all(number(r[1]) > 0 for r in rows[1:]), out
    for name, _ms, ran in rows[1:]:
        if name.startswith("explicit") or "spelled out" in name:
            assert ran == "explicit", (name, ran)
        elif name.startswith("context block alone"):
            assert ran == ("Triton kernel" if name.endswith("Triton kernel") else "SDPA"), (name, ran)
        else:
            assert ran == ("Triton context block + SDPA" if name.startswith("triton") else "SDPA"), (name, ran)


def test_rounds_with_the_triton_and_the_compiled_rows_print_every_row_with_its_ratio():
    """``--smoke --attention auto+triton --compile --rounds 2`` end to end (the triton rows, the
    compiled rows and the rounds' ratios share one table): every row, the compared ratios with their
    rounds' range (the triton rows': against roberta or their fp16 row, and the default path's row),
    the compiled ratios plain. The triton fp16 rows ran the kernel (Triton's interpreter, conftest.py;
    bf16, which the interpreter does not take, SDPA)."""
    proc = run_script("scripts/bench_gpu.py", "--smoke", "--compile", "--rounds", "2", "--attention", "auto+triton")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(the compared rows: median of 2 rounds)" in proc.stdout
    _, rows = parse(proc.stdout)
    assert len(rows) == len(ROWS) + 3 + 4, rows  # triton: fp16, bf16, AE; compiled: eager reference, fp16, bf16, AE
    rounds = r"\d+\.\d+x \(rounds \d+\.\d+-\d+\.\d+\) "
    for row in rows[1:4]:
        assert re.match(rounds, row[7]), row
    triton = rows[5:8]
    assert [r[0] for r in triton] == ["PMLM AE+PAR (unilmv2_base), Triton context block + SDPA attention",
                                      "PMLM AE+PAR (unilmv2_base), SDPA attention",
                                      "PMLM AE only (unilmv2_base), Triton context block + SDPA attention"], triton
    for row, what in zip(triton, ("roberta's sequences/s", "its fp16 row's", "roberta's sequences/s")):
        assert re.match(rounds + re.escape(what) + r".*; " + rounds + "the default path's$", row[7]), row
    (ref,) = [i for i, row in enumerate(rows) if row[7].startswith("reference for the compiled rows")]
    assert re.match(r"\d+\.\d+x eager's sequences/s$", rows[ref + 1][7]), rows
    assert proc.stderr.count(", round 2 of 2: ") == 7


def test_bench_attention_only_keeps_the_rows_whose_label_holds_one_of_the_texts(capsys, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_attention

    bench_attention.main(["--smoke", "--steps", "1", "--only", "sdpa, no bias", "--only", "forward only"])
    out = capsys.readouterr().out
    names = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")][1:]
    assert names == ["sdpa, no bias (mask only)", "sdpa, forward only (no gradient: validation, scoring)",
                     "triton, forward only"], out


def test_bench_toeplitz_smoke_prints_errors_beside_sdpas_the_call_and_host_times_and_the_tiles_table():
    """``scripts/bench_toeplitz.py --smoke --host`` (Triton's interpreter): the kernel's errors against
    fp32 are of SDPA's order (fp16 rounding, well under 1e-2), every timed cell a number, the host's
    time of a call beside SDPA's and split into the forward alone, the backward alone (through
    autograd and called directly) and the bare launches, with the
    top of its profile, and the tiles table ends with the fastest of each pass together."""
    proc = run_script("scripts/bench_toeplitz.py", "--smoke", "--steps", "1", "--host")  # the interpreter: conftest.py
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in proc.stdout.splitlines()
            if line.startswith("| ") and not line.startswith(("| dtype", "| pass", "| shape"))]
    errors, times, host, tiles = rows[:2], rows[2:4], rows[4:10], rows[10:]
    assert [r[2] for r in errors] == ["Triton kernel", "SDPA, dense bias"], rows
    assert all(0 < float(x) < 1e-2 for r in errors for x in r[3:]), errors
    assert [r[1] for r in times] == ["0.0", "0.1"] and all(number(x) > 0 for r in times for x in r[2:5]), times
    assert [r[:2] for r in host] == [["1 x 2 x 70 x 16", what] for what in (
        "kernel, forward + backward", "SDPA, bias with gradient, forward + backward",
        "kernel, forward only (no gradient)", "kernel, backward only, through autograd",
        "kernel, backward only, the Function's backward called directly", "the kernel's three launches alone")], host
    assert all(number(x) > 0 for r in host for x in r[2:]), host
    assert "cProfile of 1 calls at the small shape, by own time" in proc.stdout and "tottime" in proc.stdout
    assert [r[0] for r in tiles] == ["fwd", "fwd", "dkdv", "dq", "dq", "all three fastest"], tiles
    assert all(number(r[2]) > 0 for r in tiles), tiles
