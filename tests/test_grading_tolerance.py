"""The grader's bounds are `sim.api.tolerance`'s (one home): the README's formulas, recomputed here in float64."""

import numpy as np
import pytest

import sim.api.tolerance
from sim.grading import problem, spec

U = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 0.0}  # the storage dtypes' unit roundoff


def attention64(q, k, v, causal: bool, scale: float):
    """softmax(τ q kᵀ) v and its log-sum-exp, whole, in float64 (the shapes here are a few hundred rows at most)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = scale * q @ k.T
    if causal:  # aligned bottom-right: row r sees key c ≤ r + Nk − N
        s[np.arange(len(q))[:, None] + len(k) - len(q) < np.arange(len(k))] = -np.inf
    m = s.max(axis=1, keepdims=True)
    seen = np.isfinite(m)[:, 0]
    e = np.where(seen[:, None], np.exp(s - np.where(seen[:, None], m, 0.0)), 0.0)
    ℓ = e.sum(axis=1)
    o = np.where(seen[:, None], e @ v / np.where(seen, ℓ, 1.0)[:, None], 0.0)
    return o, np.where(seen, m[:, 0] + np.log(np.where(seen, ℓ, 1.0)), -np.inf)


def problems(name: str, seed: int = 5):
    a = spec.load(spec.locate(name))
    return a.grading, [problem.make(a.grading, t, seed) for t in a.tests]


@pytest.mark.parametrize("name", ["02", "03"])
def test_output_and_lse_bounds_are_the_readme_formulas(name):
    grading, made = problems(name)
    assert {p.case["dtype"] for p in made} >= {"fp16", "bf16", "fp32"}
    for p in made:
        q, k, v = (p.inputs[x] for x in "QKV")
        o, lse = attention64(q, k, v, p.case["causal"], p.case["scale"])
        u, floor = U[p.case["dtype"]], 1e-5 * np.abs(o).max()
        if grading["algorithm"] == "flash1":  # Tc·u·max|V| + 1e-5·max|ref|
            want = np.full(o.shape, -(-len(k) // p.case["Bc"]) * u * np.abs(v.astype(np.float64)).max() + floor)
        else:  # u·|ref| + 1e-5·max|ref|
            want = u * np.abs(o) + floor
        np.testing.assert_allclose(np.broadcast_to(p.bounds["O"], o.shape), want, rtol=1e-9, err_msg=p.name)
        stat = "L" if grading["algorithm"] == "flash2" else "ℓ"
        seen = np.isfinite(lse)
        assert p.bounds[stat] == pytest.approx(1e-5 * max(1.0, np.abs(lse[seen]).max()), rel=1e-9), p.name


def test_gradient_bounds_are_float32_arithmetic_on_the_largest_entry():
    _, made = problems("04")
    for p in made:
        for name in ("dQ", "dK", "dV"):
            assert p.bounds[name] == pytest.approx(1e-5 * np.abs(p.reference[name]).max(), rel=1e-9), (p.name, name)


def test_the_grader_reads_its_bounds_from_sim_tolerance(monkeypatch):
    """Change the library's unit roundoff and floor: the grader's bounds change with them (no copy of its own)."""
    grading, made = problems("03")
    fp16 = next(p for p in made if p.case["dtype"] == "fp16")
    monkeypatch.setitem(sim.api.tolerance.U, "fp16", 0.0)
    monkeypatch.setattr(sim.api.tolerance, "FLOOR", 1e-3)
    again = problem.make(grading, fp16.test, 5)
    np.testing.assert_allclose(np.broadcast_to(again.bounds["O"], fp16.reference["O"].shape),
                               1e-3 * np.abs(fp16.reference["O"]).max(), rtol=1e-12)  # fmt: skip
    seen = np.isfinite(fp16.reference["L"])
    assert again.bounds["L"] == pytest.approx(1e-3 * max(1.0, np.abs(fp16.reference["L"][seen]).max()))
