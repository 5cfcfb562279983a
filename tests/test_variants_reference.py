"""The float64 definition of the LLM variants, checked against hand-computed cases and finite differences."""

import json

import numpy as np
import pytest

from sim.api import reference, tolerance
from sim.api import reference_variants as rv
from tests.cli_runner import flashsim


def qkv(B, Hq, Hkv, N, Nk, d, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((B, Hq, N, d)),
        rng.standard_normal((B, Hkv, Nk, d)),
        rng.standard_normal((B, Hkv, Nk, d)),
    )


@pytest.mark.parametrize("causal", [False, True])
def test_no_variant_is_plain_attention(causal):
    q, k, v = qkv(2, 3, 3, 7, 11, 5)
    o, lse = rv.attention(q, k, v, causal=causal)
    o0, lse0 = reference.attention(q, k, v, causal=causal)
    np.testing.assert_allclose(o, o0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, lse0, rtol=1e-12)


def test_gqa_is_attention_against_each_heads_kv():
    q, k, v = qkv(1, 6, 2, 5, 9, 4)
    o, _ = rv.attention(q, k, v)
    for h in range(6):
        o_h, _ = reference.attention(q[0, h], k[0, h // 3], v[0, h // 3])
        np.testing.assert_allclose(o[0, h], o_h, rtol=1e-12, atol=1e-12)


def test_window_averages_the_keys_it_sees():
    # q = 0: every visible key has score 0, so o_i is the mean of v over the window i − 1 … i
    v = np.arange(4.0)[:, None] * np.ones((1, 2))
    o, lse = rv.attention(np.zeros((4, 2)), np.ones((4, 2)), v, window=(1, 0))
    np.testing.assert_allclose(o[:, 0], [0.0, 0.5, 1.5, 2.5])
    np.testing.assert_allclose(lse, np.log([1, 2, 2, 2]))


def test_window_minus_one_zero_is_causal_bottom_right():
    q, k, v = qkv(1, 1, 1, 5, 8, 3)
    np.testing.assert_allclose(rv.attention(q, k, v, window=(-1, 0))[0], reference.attention(q, k, v, causal=True)[0])


def test_window_hides_every_key_from_early_rows():
    # N = 6 > Nk = 3, window (0, 0): query i sees only key i − 3, so rows 0..2 see nothing
    o, lse = rv.attention(np.ones((6, 2)), np.ones((3, 2)), np.arange(6.0).reshape(3, 2), window=(0, 0))
    np.testing.assert_array_equal(o[:3], 0.0)
    assert np.isneginf(lse[:3]).all()
    np.testing.assert_allclose(o[3:], np.arange(6.0).reshape(3, 2))


def test_alibi_is_minus_slope_times_distance_bottom_right():
    # q = 0, N = 1, Nk = 3: the one query sits at key 2, scores −s·(2, 1, 0)
    s = 0.7
    o, lse = rv.attention(np.zeros((1, 1, 2)), np.ones((1, 3, 2)), np.eye(3, 2)[None] + 0, alibi_slopes=[s])
    w = np.exp(-s * np.array([2.0, 1.0, 0.0]))
    np.testing.assert_allclose(lse[0, 0], np.log(w.sum()))
    np.testing.assert_allclose(o[0, 0], (w / w.sum()) @ np.eye(3, 2))


def test_softcap_bounds_the_scores():
    # τ q·k = 100 and 0 with a softcap of 5: the scores are 5·tanh(20) and 0
    q = np.array([[10.0]])
    k = np.array([[10.0], [0.0]])
    o, lse = rv.attention(q, k, np.array([[1.0], [0.0]]), softcap=5.0, scale=1.0)
    e = np.exp(5 * np.tanh(20.0))
    np.testing.assert_allclose(o[0, 0], e / (e + 1))
    np.testing.assert_allclose(lse[0], np.log(e + 1))


@pytest.mark.parametrize(
    "options",
    [
        dict(causal=True),
        dict(window=(2, 1)),
        dict(alibi_slopes=[0.5, 0.25, 0.125, 0.0625]),
        dict(softcap=1.5),
        dict(causal=True, window=(3, -1), alibi_slopes=[0.3, 0.2, 0.1, 0.05], softcap=2.0),
    ],
)
def test_backward_equals_finite_differences(options):
    q, k, v = qkv(1, 4, 2, 5, 7, 3, seed=3)
    do = np.random.default_rng(9).standard_normal(q.shape)
    dq, dk, dv = rv.attention_backward(q, k, v, do, **options)

    def loss(q, k, v):
        return float((rv.attention(q, k, v, **options)[0] * do).sum())

    for x, g in ((q, dq), (k, dk), (v, dv)):
        num = np.zeros_like(x)
        for idx in np.ndindex(*x.shape):
            e = np.zeros_like(x)
            e[idx] = 1e-6
            args = [a + e if a is x else a for a in (q, k, v)]
            minus = [a - e if a is x else a for a in (q, k, v)]
            num[idx] = (loss(*args) - loss(*minus)) / 2e-6
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-7)


def test_varlen_is_each_sequence_on_its_own():
    rng = np.random.default_rng(1)
    lens_q, lens_k = [3, 1, 4], [5, 2, 4]
    q, k, v = rng.standard_normal((8, 4, 3)), rng.standard_normal((11, 2, 3)), rng.standard_normal((11, 2, 3))
    cq, ck = np.cumsum([0, *lens_q]), np.cumsum([0, *lens_k])
    o, lse = rv.varlen(q, k, v, cq, ck, causal=True)
    for b in range(3):
        qs, ks, vs = q[cq[b] : cq[b + 1]], k[ck[b] : ck[b + 1]], v[ck[b] : ck[b + 1]]
        for h in range(4):
            ob, lb = reference.attention(qs[:, h], ks[:, h // 2], vs[:, h // 2], causal=True)
            np.testing.assert_allclose(o[cq[b] : cq[b + 1], h], ob, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(lse[cq[b] : cq[b + 1], h], lb, rtol=1e-12)


def test_paged_cache_is_the_gathered_sequence():
    rng = np.random.default_rng(2)
    k_cache, v_cache = rng.standard_normal((6, 4, 1, 3)), rng.standard_normal((6, 4, 1, 3))
    table = np.array([[5, 0, 2], [1, 3, 4]])
    q = rng.standard_normal((2, 2, 1, 3))
    o, _ = rv.paged(q, k_cache, v_cache, table, [10, 5])
    k0 = np.concatenate([k_cache[5], k_cache[0], k_cache[2]])[:10, 0]
    v0 = np.concatenate([v_cache[5], v_cache[0], v_cache[2]])[:10, 0]
    k1 = np.concatenate([k_cache[1], k_cache[3]])[:5, 0]
    v1 = np.concatenate([v_cache[1], v_cache[3]])[:5, 0]
    for h in range(2):
        np.testing.assert_allclose(o[0, h], reference.attention(q[0, h], k0, v0)[0], rtol=1e-12)
        np.testing.assert_allclose(o[1, h], reference.attention(q[1, h], k1, v1)[0], rtol=1e-12)


def test_the_forward_bound_takes_a_softcap_s_and_alibi_s_rounding_as_the_backward_s_does():
    """Red team 95, from reading: the backward's E_f gained 4w·σ (softcap) and 3w·σ (ALiBi), the forward's own bound
    neither; by hand, w = 2⁻²⁴."""
    shape = dict(d=64, nk=1000, block_cols=64, sigma=12.5)
    plain = tolerance.weight_error("flash2", "fp16", **shape)
    assert tolerance.weight_error("flash2", "fp16", **shape, softcap=True) - plain == pytest.approx(4 * 2**-24 * 12.5)
    assert tolerance.weight_error("flash2", "fp16", **shape, alibi=True) - plain == pytest.approx(3 * 2**-24 * 12.5)
    bounds = [tolerance.tolerance("flash2", "fp16", **shape, v_max=3.0, ref_max=2.0, softcap=c) for c in (0, 1)]
    assert bounds[1].bound > bounds[0].bound
    out = {
        c: json.loads(flashsim("run", "--n", "32", "--d", "8", *c, "--json").output) for c in ((), ("--softcap", "1e6"))
    }
    assert out[("--softcap", "1e6")]["tolerance"]["bound"] > out[()]["tolerance"]["bound"]  # σ alike: 1e6 ≫ |S|
