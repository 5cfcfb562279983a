"""gpu.lab.check_slow: which calls the grid's profile leaves out, how their rows join a recording, and that the
report then judges them (hand-made rows; the counts on a GPU are gpu/NOTES.md's)."""

import pytest

from gpu.lab import check_report, check_slow
from gpu.lab.model_grid import GRID, calls


def test_the_slow_calls_are_rung_1_at_n_16384_on_each_of_its_eight_shapes():
    # GRID runs d, then N, then causal, then batch: shapes 8–11 are d = 64, N = 16384; 20–23 d = 128, N = 16384
    assert check_slow.slow_calls() == [(i, 1) for i in (8, 9, 10, 11, 20, 21, 22, 23)]
    assert all(GRID[i]["n"] == 16384 and ("forward", 1) not in calls(GRID[i]) for i, _ in check_slow.slow_calls())


def _row(kernel: str, dram: float) -> dict:
    return {"kernel": kernel, "dram__bytes_read.sum": dram}


def test_the_slow_rows_join_the_record_in_place_of_older_ones():
    fwd1 = check_slow.launched_by(1)
    old = {"env": {}, "profiled": [{**_row("flash2_v4_fwd", 1.0), "shape": 8, "direction": "forward", "rung": 6},
                                   {**_row(fwd1, 2.0), "shape": 8, "direction": "forward", "rung": 1}]}  # fmt: skip
    rows = [_row(fwd1, float(n)) for n in range(10, 18)]
    out = check_slow.merged(old, rows)["profiled"]
    assert out[0] == old["profiled"][0]  # rung 6's row kept; rung 1's stale row on shape 8 replaced
    assert [(r["shape"], r["rung"], r["dram__bytes_read.sum"]) for r in out[1:]] == [
        (8, 1, 10.0), (9, 1, 11.0), (10, 1, 12.0), (11, 1, 13.0), (20, 1, 14.0), (21, 1, 15.0), (22, 1, 16.0),
        (23, 1, 17.0),
    ]  # fmt: skip
    with pytest.raises(SystemExit, match="not the 8 slow calls"):
        check_slow.merged(old, rows[:7])


def test_the_report_judges_a_slow_call_only_where_a_recording_has_it():
    long = GRID[8]
    with_slow = [{"direction": "forward", "rung": 1}, {"direction": "forward", "rung": 2}]
    assert check_report.profiled_calls(long, with_slow) == [("forward", 1), *calls(long)]
    assert check_report.profiled_calls(long, with_slow[1:]) == calls(long)
    assert check_report.profiled_calls(GRID[0], with_slow) == calls(GRID[0])  # N = 1024: rung 1 is in calls already
