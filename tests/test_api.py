"""The public entry points: a forward Result carries what its backward needs; `sim.backward(result, do)`."""

import numpy as np
import pytest

import sim
from sim.algorithms import dropout
from sim.api import reference
from sim.api.inputs import random_inputs

ALGORITHMS = ["standard", "flash1", "flash2"]
# fp32 storage and fp32 accumulation: unit roundoff 6e-8, grown by sums of at most ~100
# terms here, stays well under 1e-5 of the largest gradient entry (as in test_backward.py).
FP32_TOL = 1e-5


def rel_err(got, want):
    """Largest error relative to the largest entry of the float64 value."""
    return np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N, Nk, d, causal", [(37, 23, 5, False), (12, 40, 7, True), (40, 12, 7, True)])
def test_backward_of_a_result_matches_float64_reference(algorithm, N, Nk, d, causal):
    q, k, v, do = random_inputs(2, 3, N, Nk, d, "fp32", N + Nk, grad=True)
    r = sim.run(algorithm, q, k, v, causal=causal, block_rows=8, block_cols=8, sram_bytes=1 << 20)
    g = sim.backward(r, do)
    want = reference.attention_backward(q, k, v, do, causal=causal)
    for got, ref in zip((g.dq, g.dk, g.dv), want, strict=True):
        assert got.shape == ref.shape and got.dtype == np.float32
        assert rel_err(got, ref) < FP32_TOL
    assert (g.algorithm, g.causal, g.scale, g.heads) == (algorithm, causal, r.scale, 6)


@pytest.mark.parametrize("algorithm", ["flash1", "flash2"])
def test_backward_of_a_result_redraws_the_forwards_dropout_mask(algorithm):
    q, k, v, do = random_inputs(1, 2, 24, 30, 6, "fp32", 3, grad=True)
    r = sim.run(algorithm, q, k, v, causal=True, dropout_p=0.25, seed=1234, block_rows=8, block_cols=8)
    g = sim.backward(r, do)
    assert (g.dropout_p, g.seed) == (0.25, 1234)
    for h in range(2):
        z = dropout.matrix(0.25, 1234, 24, 30, h)
        want = reference.attention_backward(q[0, h], k[0, h], v[0, h], do[0, h], causal=True, dropout_mask=z)
        for got, ref in zip((g.dq[0, h], g.dk[0, h], g.dv[0, h]), want, strict=True):
            assert rel_err(got, ref) < FP32_TOL


def test_a_standard_result_keeps_the_p_its_forward_left_in_hbm():
    q, k, v = random_inputs(1, 1, 20, 28, 4, "fp16", 0)
    r = sim.run("standard", q, k, v, causal=True)
    P = r.saved["P"]
    assert P.shape == (1, 1, 20, 28) and P.dtype == np.float16
    s = (q[0, 0].astype(np.float64) @ k[0, 0].astype(np.float64).T) / 2  # τ = 1/√4
    s = np.where(np.arange(28)[None, :] <= np.arange(20)[:, None] + 8, s, -np.inf)
    want = np.exp(s - s.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    # S and P are each rounded to fp16 (u = 2⁻¹¹) on their way through HBM: |ΔS| ≤ u·max|S| moves P by at
    # most a factor e^(2u·max|S|), and rounding P adds u·P
    u = 2.0**-11
    bound = (np.exp(2 * u * np.abs(s[np.isfinite(s)]).max()) - 1) * (1 + u) + u
    assert np.all(np.abs(P[0, 0].astype(np.float64) - want) <= bound * want + 1e-7)
    assert r.lse is None and r.stats == {}


def test_flash_results_keep_their_statistics():
    q, k, v = random_inputs(1, 1, 16, 16, 4, "fp32", 1)
    want = reference.attention(q, k, v)[1]
    f1, f2 = sim.run("flash1", q, k, v), sim.run("flash2", q, k, v)
    assert set(f1.saved) == {"ℓ", "m"} and set(f2.saved) == {"L"}
    assert np.allclose(f1.stats["m"] + np.log(f1.stats["ℓ"]), want, atol=1e-5)
    assert np.allclose(f2.lse, want, atol=1e-5)
    assert f1.q is not None and np.array_equal(f1.q, q) and np.array_equal(f2.v, v)


def test_backward_of_a_result_runs_on_the_forwards_part_and_sram():
    q, k, v, do = random_inputs(1, 1, 64, 64, 8, "fp16", 2, grad=True)
    r = sim.run("flash2", q, k, v, hardware="RTX-4090", sram_bytes=8192)
    g = sim.backward(r, do)
    assert (g.hardware.name, g.sram_bytes) == ("RTX-4090", 8192) and g.sram_peak_bytes <= 8192
    g = sim.backward(r, do, hardware="toy")  # another part brings its own SRAM
    assert (g.hardware.name, g.sram_bytes) == ("toy", 1024)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda r, do: sim.backward(sim.count("flash2", n=8, d=4), do), "result: a count result"),
        (lambda r, do: sim.backward(r), "backward: takes (result, do)"),
        (lambda r, do: sim.backward(r, do, causal=True), "causal: a Result carries"),
        (lambda r, do: sim.backward(r, do, seed=3), "seed: a Result carries"),
        (lambda r, do: sim.backward("flash2", r.q, r.k, r.v), "backward: takes (algorithm, q, k, v, o"),
        (lambda r, do: sim.backward(r, do, record="all"), "record:"),
    ],
)
def test_backward_forms_refuse_bad_calls_in_one_line(call, argument):
    q, k, v, do = random_inputs(1, 1, 8, 8, 4, "fp32", 0, grad=True)
    r = sim.run("flash2", q, k, v)
    with pytest.raises(sim.InputError) as e:
        call(r, do)
    assert str(e.value).startswith(argument) and "\n" not in str(e.value)


def test_random_inputs_are_seeded_and_grad_draws_after_q_k_v():
    a = random_inputs(2, 1, 5, 7, 3, "bf16", 9)
    b = random_inputs(2, 1, 5, 7, 3, "bf16", 9, grad=True)
    assert [x.shape for x in b] == [(2, 1, 5, 3), (2, 1, 7, 3), (2, 1, 7, 3), (2, 1, 5, 3)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b[:3], strict=False))
    want = np.random.default_rng(9).standard_normal((2, 1, 5, 3))
    assert np.array_equal(a[0], want.astype(a[0].dtype))
