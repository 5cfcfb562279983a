"""Issue 21 item 1: `flashsim run`'s verdict on the library's own algorithms is ✓ at every dtype, scale and size, the
bound it prints is the number it compares, and an output moved past that bound is ✗."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

import sim
from sim.algorithms.registry import REGISTRY
from sim.api import reference
from sim.api.inputs import random_inputs
from sim.cli import app
from sim.lab import report


@pytest.mark.parametrize("algo", list(REGISTRY))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("scale", ["0.01", "5", "30", "100", "-40"])
@pytest.mark.parametrize("n", [64, 256])
def test_every_algorithm_passes_its_own_verdict(algo, dtype, scale, n):
    result = CliRunner().invoke(app, ["run", "--algo", algo, "--dtype", dtype, "--scale", scale, "--n", str(n),
                                      "--d", "32", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    tol = out["tolerance"]
    assert tol["within"] is True and out["max_abs_err"] <= tol["bound"]


def test_the_printed_bound_is_the_compared_one():
    text = CliRunner().invoke(app, ["run", "--n", "256", "--d", "32", "--scale", "30"]).stdout
    out = json.loads(CliRunner().invoke(app, ["run", "--n", "256", "--d", "32", "--scale", "30", "--json"]).stdout)
    assert f"(≤ {out['tolerance']['bound']:.3e})" in text and "✓ within" in text


@pytest.mark.parametrize("algo", list(REGISTRY))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_an_output_moved_past_the_bound_fails(algo, dtype):
    q, k, v = random_inputs(1, 1, 96, 96, 16, dtype, 3)
    result = sim.run(algo, q, k, v, scale=2.0)
    good = report.output_check(result, q, k, v)
    assert good["tolerance"]["within"]
    bound = good["tolerance"]["bound"]
    ref, _ = reference.attention(q, k, v, scale=2.0)
    out = result.output.astype(np.float64)
    out[..., 5, 3] = ref[..., 5, 3] + 1.01 * bound  # one element just past the bound (stored exactly in float64)
    result.output = out
    bad = report.output_check(result, q, k, v)
    assert bad["tolerance"]["within"] is False
    assert bad["max_abs_err"] == pytest.approx(1.01 * bound, rel=1e-9)
