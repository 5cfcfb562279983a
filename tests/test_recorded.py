"""gpu.lab.recorded: the shipped GPU recordings load with their GPU, date and command, on a machine without a GPU."""

import json

import pytest

from gpu import registry
from gpu.lab import recorded
from gpu.lab.harness import flops
from sim.core.errors import InputError


def test_the_shipped_benchmark_loads_with_where_it_came_from():
    rec = recorded.load("bench-h100")
    raw = json.loads((recorded.RESULTS_DIR / "bench-h100.json").read_text())
    assert rec.report == raw
    assert rec.gpu == raw["device"]["name"] == "NVIDIA H100 80GB HBM3"
    assert (rec.date, rec.command) == (raw["env"]["date"], raw["env"]["command"])
    assert rec.command.startswith("flashsim bench gpu")
    assert rec.label() == (
        f"recorded on NVIDIA H100 80GB HBM3, {rec.date}, with `{rec.command}` (gpu/lab/results/bench-h100.json)"
    )
    assert "bench-h100" in recorded.names("bench")


def test_every_shipped_recording_says_where_it_came_from():
    for name in recorded.names():
        rec = recorded.load(name)
        # the ladder's module was gpu.ladder until gpu/lab/ (issue 19): a recording keeps the command it ran
        commands = {
            "ladder": ("python -m gpu.lab.ladder ", "python -m gpu.ladder "),
            "model-check": ("python -m gpu.lab.check_model ",),
            "l2-parts": ("python -m gpu.lab.check_model parts ",),
            "calibration": ("python -m gpu.lab.calibrate ",),
            "compare-variants": ("python -m gpu.lab.compare_variants ", "flashsim compare --variants"),
            "bench-variants": ("python -m gpu.lab.bench_variants ", "flashsim bench gpu --variants"),
            "backward-rungs": ("python -m gpu.lab.backward_rungs ",),
            "backward-builds": ("python -m gpu.lab.backward_builds ",),
            "training-speed": ("python -m gpu.lab.training_speed ",),
            "rung7-blocks": ("python -m gpu.lab.rung7_blocks ",),
            "rung7-paces": ("python -m gpu.lab.block_stamps ",),
            "l2-tags": ("python -m gpu.lab.l2_tags ",),
            "nvrtc-spills": ("python -m gpu.lab.nvrtc_spills ",),
        }.get(rec.report["kind"], ("flashsim ",))
        gpu = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}[name.rsplit("-", 1)[1]]  # named for its GPU
        assert rec.gpu == gpu and rec.date.startswith("2026-") and rec.command.startswith(commands)


def test_the_ladder_recording_holds_every_rung_of_the_registry_checked_and_timed():
    rec = recorded.load("ladder-h100")
    assert rec.report["kind"] == "ladder"
    # the recording names each rung as the registry did before issue 19 (v1 … v4): its direction and file are the key
    assert {k: (r["direction"], r["file"]) for k, r in rec.report["rungs"].items()} == {
        str(k): (s.direction, s.file) for k, s in registry.LADDER.items()
    }
    for row in rec.report["rows"]:
        assert row["flops"] == flops(row["n"], row["n"], row["d"], row["batch"], row["heads"], row["causal"])
        assert row["batch"] * row["n"] == 16384 and row["heads"] * row["d"] == 2048  # FlashAttention-2's benchmark
        assert set(row["rungs"]) == {str(k) for k in registry.LADDER}
        assert all(r["tflops"] > 0 and r["sdpa_tflops"] > 0 for r in row["rungs"].values())  # none failed its check
    assert sorted((r["d"], r["causal"]) for r in rec.report["rows"]) == [
        (64, False),
        (64, True),
        (128, False),
        (128, True),
    ]


def test_a_report_measured_just_now_is_labelled_live():
    report = {
        "env": {"gpu": "NVIDIA H200", "date": "2027-01-02T00:00:00+00:00", "command": "gpu.lab.ladder.run_ladder()"}
    }
    rec = recorded.measured(report, "ladder-h200")
    assert (rec.gpu, rec.date, rec.command, rec.live) == (
        "NVIDIA H200",
        "2027-01-02T00:00:00+00:00",
        "gpu.lab.ladder.run_ladder()",
        True,
    )
    assert (
        rec.label() == "measured just now on NVIDIA H200, 2027-01-02T00:00:00+00:00, with `gpu.lab.ladder.run_ladder()`"
    )
    assert not recorded.load("bench-h100").live
    with pytest.raises(InputError, match=r"^name: the report 'x' does not say its date, command"):
        recorded.measured({"env": {"gpu": "NVIDIA H200"}}, "x")


def test_every_name_the_lessons_live_path_calls_exists_here():
    """Lesson 8 runs these where a GPU is present; they cannot run here, but they must import and take its arguments."""
    import inspect

    from gpu.lab.bench import run_bench
    from gpu.lab.compare import compare, report
    from gpu.lab.compare_backward import compare_backward
    from gpu.lab.compare_backward import report as backward_report
    from gpu.lab.ladder import run_ladder
    from gpu.lab.render_compare import backward_comparison, comparison  # noqa: F401
    from gpu.lab.train import train

    shape = {"n", "nk", "d", "batch", "heads", "dtype", "causal"}
    assert shape <= set(inspect.signature(compare).parameters) and shape <= set(
        inspect.signature(compare_backward).parameters
    )
    assert {"quick", "backward", "command"} <= set(inspect.signature(run_bench).parameters)
    for fn in (run_ladder, train, report, backward_report):
        assert "command" in inspect.signature(fn).parameters
    for name in ("compare-forward-h100", "compare-backward-h100", "compare-backward-causal-h100"):
        assert shape <= set(recorded.load(name).report["config"])  # the lesson runs the recorded shape


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


def test_the_readme_quotes_the_compare_recordings_in_decimal_units():
    """The README's `flashsim compare` figures are the recorded runs' bytes moved, in MB as compare prints them."""
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    forward = recorded.load("compare-forward-h100").report["bytes"]
    asked, predicted = forward["measured"]["tma_bytes"], forward["predicted"]["read"]
    dram = forward["measured"]["dram_read_bytes"]
    assert (f"ask L2 for {asked / 1e6:.1f} MB where the simulator, given the kernel's Br = 192 and Bc = 128, "
            f"predicts {predicted / 1e6:.1f} MB") in readme  # fmt: skip
    assert f"DRAM supplies only {dram / 1e6:.1f} MB" in readme  # 12,623,360 B: 12.6 MB (12.0 MiB)
    backward = recorded.load("compare-backward-h100").report["bytes"]
    dq, reduced = backward["predicted_dq_bytes"], backward["expected_reduction_bytes"]
    assert f"({dq / 1e6:.1f} MB each way)" in readme and f"exactly the {reduced / 1e6:.1f} MB of float32" in readme
