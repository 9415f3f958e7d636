"""scripts/bench_bias.py: the relative-position bias of one update, block by block."""
import os

from test_bench_gpu import number

from cli import REPO


def test_bench_bias_smoke_times_each_block_both_ways_and_the_whole_plan(capsys, monkeypatch):
    """``--smoke`` (in-process, the CPU): one row per block of the plan, the appended block and the
    last layer's columns also as the rule builds them, and the whole plan; every time positive."""
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_bias

    bench_bias.main(["--smoke", "--steps", "1"])
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert [r[0] for r in rows] == ["bias block, forward + backward", "context block", "appended block",
                                    "appended block, by the rule", "last layer's columns",
                                    "last layer's columns, by the rule", "the whole plan"], out
    assert all(number(r[1]) > 0 for r in rows[1:]), out
    assert "batch 4 x " in out and "(64 context), 4 heads" in out, out
