"""gpu.lab.check_model measure --only … --over …: one call's measurements put in place of a whole grid's record."""

import pytest

from gpu.lab.check_model import replaced


def test_one_calls_measurements_replace_the_old_ones():
    grid = [{"d": 64, "n": 1024}, {"d": 128, "n": 1024}]
    old = {"env": {"date": "before"}, "grid": grid,
           "timed": {"0": {"forward 6": 1.0, "backward 7": 2.0}, "1": {"forward 6": 3.0, "backward 7": 4.0}},
           "profiled": [{"shape": 0, "direction": "forward", "rung": 6, "x": 1},
                        {"shape": 0, "direction": "backward", "rung": 7, "x": 2},
                        {"shape": 1, "direction": "backward", "rung": 7, "x": 3}]}  # fmt: skip
    new = {"env": {"date": "now"}, "grid": grid, "timed": {0: {"backward 7": 20.0}, 1: {"backward 7": 40.0}},
           "profiled": [{"shape": 0, "direction": "backward", "rung": 7, "x": 20},
                        {"shape": 1, "direction": "backward", "rung": 7, "x": 30}]}  # fmt: skip
    out = replaced(old, new, ("backward", 7))
    # backward 7's timings and launches are the new ones; forward 6's stay; the environment names both records
    assert out["timed"] == {"0": {"forward 6": 1.0, "backward 7": 20.0}, "1": {"forward 6": 3.0, "backward 7": 40.0}}
    assert [r["x"] for r in out["profiled"]] == [1, 20, 30]
    assert out["env"] == {"date": "now", "replaces": "backward 7", "over": {"date": "before"}}
    with pytest.raises(SystemExit):
        replaced({**old, "grid": grid[:1]}, new, ("backward", 7))


def test_the_replaced_calls_host_work_is_the_new_records_the_others_stay():
    grid = [{"d": 64, "n": 1024}]
    old = {"env": {}, "grid": grid, "timed": {"0": {"forward 6": 1.0, "backward 7": 2.0}}, "profiled": [],
           "host_seconds": {"forward 6": 65e-6, "backward 7": 143e-6}}  # fmt: skip
    new = {"env": {}, "grid": grid, "timed": {0: {"backward 7": 3.0}}, "profiled": [],
           "host_seconds": {"forward 6": 80e-6, "backward 7": 160e-6}}  # fmt: skip
    # forward 6's events were timed beside the old record's host: its host work stays the old one
    assert replaced(old, new, ("backward", 7))["host_seconds"] == {"forward 6": 65e-6, "backward 7": 160e-6}
    # an old record without host work gains the replaced call's only
    bare = {k: v for k, v in old.items() if k != "host_seconds"}
    assert replaced(bare, new, ("backward", 7))["host_seconds"] == {"backward 7": 160e-6}
    # a new record without host work leaves the old one whole
    without = {k: v for k, v in new.items() if k != "host_seconds"}
    assert replaced(old, without, ("backward", 7))["host_seconds"] == {"forward 6": 65e-6, "backward 7": 143e-6}


def test_the_replaced_calls_loop_figures_are_the_new_records_the_others_stay():
    # "loop": each shape's host seconds a call and SM clock in the loop that timed it (old: read from JSON, keys
    # are strings; new: the run's own, keys are ints)
    grid = [{"d": 64, "n": 1024}, {"d": 128, "n": 1024}]
    f6, b7 = {"host_seconds": 30e-6, "clock_hz": 1.98e9}, {"host_seconds": 90e-6, "clock_hz": 1.9e9}
    old = {"env": {}, "grid": grid, "timed": {"0": {"forward 6": 1.0}, "1": {"forward 6": 2.0}}, "profiled": [],
           "loop": {"0": {"forward 6": f6, "backward 7": {"host_seconds": 1.0, "clock_hz": 1.0}}}}  # fmt: skip
    new = {"env": {}, "grid": grid, "timed": {0: {"backward 7": 3.0}, 1: {"backward 7": 4.0}}, "profiled": [],
           "loop": {0: {"backward 7": b7}, 1: {"backward 7": b7}}}  # fmt: skip
    assert replaced(old, new, ("backward", 7))["loop"] == {"0": {"forward 6": f6, "backward 7": b7},
                                                           "1": {"backward 7": b7}}  # fmt: skip
    # a new record without loop figures drops the replaced call's old ones (they timed other events)
    bare = {k: v for k, v in new.items() if k != "loop"}
    assert replaced(old, bare, ("backward", 7))["loop"] == {"0": {"forward 6": f6}}
    assert "loop" not in replaced({k: v for k, v in old.items() if k != "loop"}, bare, ("backward", 7))
