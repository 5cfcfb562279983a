"""`flashsim demo train` on any machine: bad values and absurd runs are refused in one line before it looks for a GPU."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import gpu
from sim.cli import app

RECORDED = Path(gpu.__file__).parent / "lab" / "results" / "train-h100.json"


def refusal(*args) -> str:
    result = CliRunner().invoke(app, ["demo", "train", *map(str, args)])
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return lines[0]


def no_gpu_lookup(monkeypatch):
    def require(*_, **__):
        raise AssertionError("demo train looked for a GPU before refusing its options")

    monkeypatch.setattr(gpu.device, "require", require)


@pytest.mark.parametrize(
    "args,option",
    [
        (("--steps", 10**12), "--steps"),
        (("--steps", 2**53), "--steps"),
        (("--steps", 3), "--steps"),  # the first 5 steps are not timed
        (("--steps", 0), "--steps"),
        (("--steps", "nan"), "--steps"),
        (("--dtype", "fp32"), "--dtype"),
        (("--plot", "/nonexistent/dir/loss.svg"), "--plot"),
        (("--plot", ""), "--plot"),
        (("--json", "/nonexistent/dir/train.json"), "--json"),
    ],
)
def test_bad_values_and_absurd_runs_are_refused_before_looking_for_a_gpu(args, option, monkeypatch):
    no_gpu_lookup(monkeypatch)
    assert re.search(rf"{option}\b", refusal(*args))


def test_the_refusal_says_how_long_and_what_to_try(monkeypatch):
    no_gpu_lookup(monkeypatch)
    line = refusal("--steps", 10**9)
    assert "about" in line and "try --steps" in line and "or less" in line
    assert "H100" in line  # the estimate is the recorded H100 run's pace


def test_the_estimate_is_the_recorded_runs_pace():
    """Seconds per step of both runs: tokens per step over each run's recorded tokens/s (gpu/results)."""
    from gpu.lab.train import TrainConfig
    from sim.cli import estimate

    report = json.loads(RECORDED.read_text())
    assert (report["config"]["batch"], report["config"]["seq"]) == (TrainConfig().batch, TrainConfig().seq)
    tokens = report["config"]["batch"] * report["config"]["seq"]
    per_step = sum(tokens / rate for rate in report["tokens_per_s"].values())
    assert estimate.training(1000).seconds == pytest.approx(1000 * per_step, rel=1e-3)
    assert estimate.training(report["config"]["steps"]).seconds < estimate.BENCH_LIMIT_SECONDS
