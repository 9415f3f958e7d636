"""scripts/bench_bias.py: the relative-position bias of one update, block by block."""
import os

from test_bench_gpu import number

from cli import REPO


def test_bench_bias_smoke_times_each_block_both_ways_and_the_whole_plan(capsys, monkeypatch):
    """``--smoke`` (in-process, the CPU): one row per block of the plan, the appended block and the
    last layer's columns also as the rule builds them, and the whole plan; every time positive, and
    each row's ops dispatched (views apart) counted."""
    monkeypatch.syspath_prepend(os.path.join(REPO, "scripts"))
    import bench_bias

    bench_bias.main(["--smoke", "--steps", "1"])
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    assert rows[0] == ["bias block, forward + backward", "ms", "ops, views apart (views)"], out
    assert [r[0] for r in rows] == ["bias block, forward + backward", "context block", "appended block",
                                    "appended block, by the rule", "last layer's columns",
                                    "last layer's columns, by the rule", "the whole plan"], out
    assert all(number(r[1]) > 0 for r in rows[1:]), out
    ops = {r[0]: [int(n) for n in r[2].replace("(", "").replace(")", "").split()] for r in rows[1:]}
    # the ops each block dispatches, views counted apart; the whole plan is the three blocks
    assert all(n > 0 for counts in ops.values() for n in counts), out
    parts = ("context block", "appended block", "last layer's columns")
    assert ops["the whole plan"][0] == sum(ops[p][0] for p in parts), out
    assert "batch 4 x " in out and "(64 context), 4 heads" in out, out
