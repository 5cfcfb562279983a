"""The grader's bounds are `sim.api.tolerance`'s (one home): the README's formulas, recomputed here in float64."""

import importlib.util
import runpy
from dataclasses import replace

import numpy as np
import pytest

import sim.api.tolerance
from sim.grading import checks, grader, problem, spec
from sim.grading.server import ChipServer

U = {"fp16": 2.0**-11, "bf16": 2.0**-8, "fp32": 0.0}  # the storage dtypes' unit roundoff
W = 2.0**-24  # float32's


def softmax64(q, k, causal: bool, scale: float):
    """P = softmax(τ q kᵀ) (0 where the causal mask hides a key) and its log-sum-exp, whole, in float64."""
    q, k = (x.astype(np.float64) for x in (q, k))
    s = scale * q @ k.T
    if causal:  # aligned bottom-right: row r sees key c ≤ r + Nk − N
        s[np.arange(len(q))[:, None] + len(k) - len(q) < np.arange(len(k))] = -np.inf
    m = s.max(axis=1, keepdims=True)
    seen = np.isfinite(m)[:, 0]
    e = np.where(seen[:, None], np.exp(s - np.where(seen[:, None], m, 0.0)), 0.0)
    ℓ = e.sum(axis=1)
    return e / np.where(seen, ℓ, 1.0)[:, None], np.where(seen, m[:, 0] + np.log(np.where(seen, ℓ, 1.0)), -np.inf)


def attention64(q, k, v, causal: bool, scale: float):
    """softmax(τ q kᵀ) v and its log-sum-exp, whole, in float64 (the shapes here are a few hundred rows at most)."""
    p, lse = softmax64(q, k, causal, scale)
    return p @ v.astype(np.float64), lse


def score_term64(q, k, v, o, p, scale: float, bc: int):
    """The scores' rounding, row by row: e^(D̄_i)·Σ_j p_ij·(e^(D_ij) − 1)·|v_jc − O_ic| over the keys row i sees,
    D_ij = γ(d+1)·τ·Σ_t |q_it|·|k_jt| + 4w·(m_i − S_ij) + 3(Tc + 1)·w."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    d, tc = q.shape[1], -(-len(k) // bc)
    out = np.zeros(o.shape)
    for i in range(len(q)):
        js = np.flatnonzero(p[i] > 0)
        if len(js):
            lnp = np.log(p[i, js])
            D = (d + 1) * W / (1 - (d + 1) * W) * scale * (np.abs(k[js]) @ np.abs(q[i]))
            D += 4 * W * (lnp.max() - lnp) + 3 * (tc + 1) * W
            out[i] = np.exp(p[i, js] @ D) * (p[i, js] * np.expm1(D)) @ np.abs(v[js] - o[i])
    return out


def problems(name: str, seed: int = 5):
    a = spec.load(spec.locate(name))
    return a.grading, [problem.make(a.grading, t, seed) for t in a.tests]


@pytest.mark.parametrize("name", ["02", "03"])
def test_output_and_lse_bounds_are_the_readme_formulas(name):
    grading, made = problems(name)
    assert {p.case["dtype"] for p in made} >= {"fp16", "bf16", "fp32"}
    for p in made:
        q, k, v = (p.inputs[x] for x in "QKV")
        P, lse = softmax64(q, k, p.case["causal"], p.case["scale"])
        o = P @ v.astype(np.float64)
        u, floor = U[p.case["dtype"]], 1e-5 * np.abs(o).max()
        floor = floor + score_term64(q, k, v, o, P, p.case["scale"], p.case["Bc"])  # the scores' rounding
        if grading["algorithm"] == "flash1":  # Tc·u·max|V| + 1e-5·max|ref|
            want = -(-len(k) // p.case["Bc"]) * u * np.abs(v.astype(np.float64)).max() + floor
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
    q, k, v = (fp16.inputs[x] for x in "QKV")
    P, _ = softmax64(q, k, fp16.case["causal"], fp16.case["scale"])
    scores = score_term64(q, k, v, fp16.reference["O"], P, fp16.case["scale"], fp16.case["Bc"])
    np.testing.assert_allclose(np.broadcast_to(again.bounds["O"], fp16.reference["O"].shape),
                               1e-3 * np.abs(fp16.reference["O"]).max() + scores, rtol=1e-9)  # fmt: skip
    seen = np.isfinite(fp16.reference["L"])
    assert again.bounds["L"] == pytest.approx(1e-3 * max(1.0, np.abs(fp16.reference["L"][seen]).max()))


# -- red team 106: a correct float32 kernel at logits in the hundreds ------------------------------------------------

LOG2E = 1.4426950408889634
LOGITS = "logits in the hundreds"
RED_TEAM_SEED = 1116928100  # assignment 7's master scored 90/100 there: O[12, 11] off by 3.95e-05, allowed 3.49e-05


def triton_master32(q, k, v, scale: float, Br: int, Bc: int, p16: bool = False, rescale: bool = True):
    """Assignment 7's master as Triton's interpreter computes it, in NumPy float32 (no mask: the test has none):
    S = fl(q kᵀ)·fl(fl(τ)·fl(log₂ e)), P̃ = exp2(S − m) and α = exp2(m_old − m) per K/V block, O_i / ℓ_i at the end.
    p16 rounds P̃ to fp16 for P̃V; rescale=False leaves out the division by ℓ_i."""
    f = np.float32
    c = f(f(scale) * f(LOG2E))
    q, k, v = (x.astype(f) for x in (q, k, v))
    out = np.zeros(q.shape, f)
    for r0 in range(0, len(q), Br):
        m, ℓ, o = (
            np.full(len(q[r0 : r0 + Br]), -np.inf, f),
            np.zeros(len(q[r0 : r0 + Br]), f),
            np.zeros_like(q[r0 : r0 + Br]),
        )
        for c0 in range(0, len(k), Bc):
            s = (q[r0 : r0 + Br] @ k[c0 : c0 + Bc].T) * c
            m_new = np.maximum(m, s.max(axis=1))
            p, α = np.exp2(s - m_new[:, None]), np.exp2(m - m_new)
            ℓ = α * ℓ + p.sum(axis=1)
            o = o * α[:, None] + (p.astype(np.float16).astype(f) if p16 else p) @ v[c0 : c0 + Bc]
            m = m_new
        out[r0 : r0 + Br] = o / ℓ[:, None] if rescale else o
    return out


def ratio(p: problem.Problem, O) -> tuple[float, float]:
    """max |O − ref| / bound against the graded bound and against the floor alone (before red team 106)."""
    q, k, v = (p.inputs[x] for x in "QKV")
    ref = attention64(q, k, v, p.case["causal"], p.case["scale"])[0]
    err = np.abs(O.astype(np.float64) - ref)
    return float((err / p.bounds["O"]).max()), float(err.max() / (1e-5 * np.abs(ref).max()))


def test_the_scores_rounding_is_in_the_bound_of_a_float32_kernel_at_logits_in_the_hundreds():
    """Over 300 seeds of assignment 7's test, the master's arithmetic as written stays within the graded bound; the
    floor alone (1e-5·max|ref|) did not hold it at red team 106's seed nor everywhere."""
    a = spec.load(spec.locate("07"))
    test = next(t for t in a.tests if t["name"] == LOGITS)
    worst, worst_floor = 0.0, 0.0
    for seed in [RED_TEAM_SEED, *range(300)]:
        p = problem.make(a.grading, test, seed)
        q, k, v = (p.inputs[x] for x in "QKV")
        graded, floor = ratio(p, triton_master32(q, k, v, p.case["scale"], p.case["Br"], p.case["Bc"]))
        assert graded <= 1, seed
        if seed == RED_TEAM_SEED:
            assert floor > 1.1  # its 3.95e-05 where the floor allowed 3.49e-05
        worst, worst_floor = max(worst, graded), max(worst_floor, floor)
    assert worst_floor > 1 and worst < 0.25  # worst case, not tight: the term's dot product at γ(d+1)


@pytest.mark.parametrize("wrong", ["p16", "no rescale"])
def test_a_wrong_kernel_still_fails_the_fp32_tests(wrong):
    """P̃ rounded to fp16 in an fp32 test, or O_i never divided by ℓ_i: out of the bound at every seed of "one block",
    and at most seeds of logits in the hundreds (where the P̃ of a near one-hot row, exp2(0) = 1, rounds exactly)."""
    a = spec.load(spec.locate("07"))
    options = {"p16": wrong == "p16", "rescale": wrong != "no rescale"}
    for name, fraction in (("one block", 1.0), (LOGITS, 0.6)):
        test = next(t for t in a.tests if t["name"] == name)
        failed = 0
        for seed in range(100):
            p = problem.make(a.grading, test, seed)
            q, k, v = (p.inputs[x] for x in "QKV")
            failed += ratio(p, triton_master32(q, k, v, p.case["scale"], p.case["Br"], p.case["Bc"], **options))[0] > 1
        assert failed >= fraction * 100, (name, failed)


@pytest.mark.parametrize("name, test, seed", [("02", LOGITS, 861), ("03", "causal, logits in the hundreds", 283)])
def test_the_chip_masters_pass_at_the_seeds_where_the_floor_failed_them(name, test, seed):
    """Assignments 2 and 3's masters, run on the grader's own Chip: over the floor alone at these seeds (by 1.53 and
    1.02), within the graded bound."""
    a = spec.load(spec.locate(name))
    module = runpy.run_path(str(a.path))  # the master, solution included
    p = problem.make(a.grading, next(t for t in a.tests if t["name"] == test), seed)
    server = ChipServer(p.sram_bytes, p.inputs)
    module[a.grading["entry"]](server.chip, **p.kwargs)
    outputs = checks._outputs(a.grading, p, checks.Outcome("done", server=server))
    graded, floor = ratio(p, np.asarray(outputs["O"]))
    assert checks.compare(p, outputs) == "" and graded <= 1 and floor > 1


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_assignment_7s_master_passes_logits_in_the_hundreds_at_red_team_106s_seed():
    """Graded as a student's file is (Triton's interpreter, in the submission's process): 90/100 before."""
    a = spec.load(spec.locate("07"))
    tests = tuple(t for t in a.tests if t["name"] == LOGITS)
    (report,) = grader.grade(replace(a, tests=tests), [a.path], seed=RED_TEAM_SEED, jobs=1)
    (result,) = report.tests
    assert result.status == "passed", result.feedback
