"""gpu.recorded: the shipped GPU recordings load with their GPU, date and command, on a machine without a GPU."""

import json

import pytest

from gpu import recorded
from sim.errors import InputError


def test_the_shipped_benchmark_loads_with_where_it_came_from():
    rec = recorded.load("bench-h100")
    raw = json.loads((recorded.RESULTS_DIR / "bench-h100.json").read_text())
    assert rec.report == raw
    assert rec.gpu == raw["device"]["name"] == "NVIDIA H100 80GB HBM3"
    assert (rec.date, rec.command) == (raw["env"]["date"], raw["env"]["command"])
    assert rec.command.startswith("flashsim bench gpu")
    assert rec.label() == (
        f"recorded on NVIDIA H100 80GB HBM3, {rec.date}, with `{rec.command}` (gpu/results/bench-h100.json)"
    )
    assert "bench-h100" in recorded.names("bench")


def test_every_shipped_recording_says_where_it_came_from():
    for name in recorded.names():
        rec = recorded.load(name)
        assert (
            rec.gpu == "NVIDIA H100 80GB HBM3" and rec.date.startswith("2026-") and rec.command.startswith("flashsim ")
        )


def test_a_recording_that_says_its_date_and_command_is_labelled_with_them(tmp_path):
    report = {
        "device": {"name": "NVIDIA H200"},
        "date": "2027-01-02",
        "command": "flashsim bench gpu --backward",
        "rows": [],
    }
    (tmp_path / "bench-h200-backward.json").write_text(json.dumps(report))
    (tmp_path / "compare-h200.json").write_text(json.dumps(report))
    rec = recorded.load("bench-h200-backward", tmp_path)
    assert (rec.gpu, rec.date, rec.command) == ("NVIDIA H200", "2027-01-02", "flashsim bench gpu --backward")
    assert recorded.names("bench", tmp_path) == ["bench-h200-backward"]
    assert recorded.names("", tmp_path) == ["bench-h200-backward", "compare-h200"]


def test_unknown_or_unlabelled_recordings_are_refused_in_one_line(tmp_path):
    with pytest.raises(InputError, match=r"^name: no recording 'nope' in .*; choose one of .*bench-h100"):
        recorded.load("nope")
    (tmp_path / "bare.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(InputError, match=r"^name: recording bare.json does not say its date, command, device"):
        recorded.load("bare", tmp_path)
