"""Dropout: a seeded counter-based mask, drawn again tile by tile in the backward pass and never stored."""

import numpy as np
import pytest

import sim
from sim.algorithms import dropout
from sim.algorithms.dropout import Dropout
from sim.api import reference

FP32_TOL = 1e-5  # fp32 storage and accumulation (see test_backward.py)


def inputs(N, Nk, d, seed=0, lead=()):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((*lead, rows, d)).astype(np.float32) for rows in (N, Nk, Nk, N))


def rel_err(got, want):
    return np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_score_is_kept_with_probability_one_minus_p(p):
    z = dropout.matrix(p, seed=3, N=300, Nk=1000)
    n = z.size
    kept = np.count_nonzero(z) / n
    assert abs(kept - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)  # 5 standard deviations of a binomial
    assert set(np.unique(z)) == {0.0, np.float32(1 / (1 - p))}  # kept entries scaled so E[Z] = 1


def test_draws_are_uniform_and_neighbours_uncorrelated():
    u = dropout.uniform(seed=11, head=0, r0=0, r1=400, c0=0, c1=500)
    n = u.size
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    assert (np.abs(counts - n / 10) < 5 * np.sqrt(n * 0.1 * 0.9)).all()
    for a, b in ((u[:, :-1], u[:, 1:]), (u[:-1], u[1:])):  # along a row, down a column
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 5 / np.sqrt(a.size)


def test_a_tile_mask_depends_on_seed_head_and_its_rows_and_columns_only():
    whole = dropout.matrix(0.3, seed=5, N=40, Nk=50, head=2)
    for rows, cols in (((0, 8), (0, 16)), ((8, 40), (16, 50)), ((13, 14), (49, 50))):
        assert np.array_equal(Dropout(0.3, 5, 2).mask(rows, cols), whole[slice(*rows), slice(*cols)])
    other_seed, other_head = dropout.matrix(0.3, 6, 40, 50, 2), dropout.matrix(0.3, 5, 40, 50, 3)
    for other in (other_seed, other_head):  # independent masks agree on p² + (1 − p)² = 58% of entries
        assert abs((other == whole).mean() - 0.58) < 0.06


@pytest.mark.parametrize("algorithm", ["flash1", "flash2"])
@pytest.mark.parametrize("N, Nk, causal", [(24, 24, False), (30, 17, True), (9, 40, True)])
def test_forward_output_is_attention_with_the_seeded_mask(algorithm, N, Nk, causal):
    q, k, v, _ = inputs(N, Nk, 6, seed=1)
    r = sim.run(algorithm, q, k, v, causal=causal, dropout_p=0.2, seed=99, block_rows=8, block_cols=5)
    o, lse = reference.attention(q, k, v, causal=causal, dropout_mask=dropout.matrix(0.2, 99, N, Nk))
    assert rel_err(r.output, o) < FP32_TOL
    assert r.seed == 99 and r.dropout_p == 0.2
    # the statistics are those of the softmax before dropout
    with np.errstate(divide="ignore"):  # ℓ = 0 in a row that sees no key: L = −∞, as the reference's
        got = r.lse if algorithm == "flash2" else r.stats["m"] + np.log(r.stats["ℓ"])
    assert np.allclose(got, lse, rtol=FP32_TOL, atol=0)


@pytest.mark.parametrize("algorithm", ["flash1", "flash2"])
@pytest.mark.parametrize("N, Nk, d, causal", [(24, 24, 4, False), (30, 17, 5, True), (9, 40, 3, True)])
def test_gradients_match_float64_reference_with_the_same_mask(algorithm, N, Nk, d, causal):
    q, k, v, do = inputs(N, Nk, d, seed=2)
    f = sim.run(algorithm, q, k, v, causal=causal, dropout_p=0.25, seed=7, block_rows=8, block_cols=8)
    stats = f.stats if algorithm == "flash1" else f.lse
    # a different tiling from the forward's: the mask is keyed by the tile's rows and columns, not its index
    g = sim.backward(
        algorithm, q, k, v, f.output, stats, do, causal=causal, dropout_p=0.25, seed=f.seed, block_rows=5, block_cols=3
    )
    z = dropout.matrix(0.25, 7, N, Nk)
    want = reference.attention_backward(q, k, v, do, causal=causal, dropout_mask=z)
    for got, ref in zip((g.dq, g.dk, g.dv), want, strict=True):
        assert rel_err(got, ref) < FP32_TOL
    wrong = reference.attention_backward(q, k, v, do, causal=causal, dropout_mask=dropout.matrix(0.25, 8, N, Nk))
    assert rel_err(g.dv, wrong[2]) > 1e-2  # another seed's mask gives other gradients


def test_batched_heads_draw_their_own_masks_and_the_backward_redraws_each():
    q, k, v, do = inputs(12, 16, 4, seed=4, lead=(2, 2))
    f = sim.run("flash2", q, k, v, causal=True, dropout_p=0.3)  # no seed given: a fresh one, returned
    assert isinstance(f.seed, int)
    g = sim.backward("flash2", q, k, v, f.output, f.lse, do, causal=True, dropout_p=0.3, seed=f.seed)
    for n, (b, h) in enumerate(np.ndindex(2, 2)):
        z = dropout.matrix(0.3, f.seed, 12, 16, head=n)
        o, _ = reference.attention(q[b, h], k[b, h], v[b, h], causal=True, dropout_mask=z)
        assert rel_err(f.output[b, h], o) < FP32_TOL
        want = reference.attention_backward(q[b, h], k[b, h], v[b, h], do[b, h], causal=True, dropout_mask=z)
        for got, ref in zip((g.dq[b, h], g.dk[b, h], g.dv[b, h]), want, strict=True):
            assert rel_err(got, ref) < FP32_TOL


@pytest.mark.parametrize("algorithm", ["flash1", "flash2"])
def test_no_mask_is_ever_stored_or_read(algorithm):
    N, Nk, d = 32, 48, 8
    q, k, v, do = inputs(N, Nk, d, seed=6)
    runs = {}
    for p in (0.0, 0.5):
        f = sim.run(algorithm, q, k, v, dropout_p=p, seed=1, block_rows=8, block_cols=16)
        stats = f.stats if algorithm == "flash1" else f.lse
        g = sim.backward(algorithm, q, k, v, f.output, stats, do, dropout_p=p, seed=1, block_rows=8, block_cols=16)
        runs[p] = (f.ledger.per_tensor(), g.ledger.per_tensor())
    # the same tensors move the same bytes with and without dropout: no mask tensor, no mask bytes
    assert runs[0.5] == runs[0.0]
    assert "Z" not in runs[0.5][1] and all(
        t in {"Q", "K", "V", "O", "dO", "ℓ", "m", "L", "D", "dQ", "dK", "dV"} for t in runs[0.5][1]
    )


def test_reference_dropout_gradient_matches_finite_differences():
    rng = np.random.default_rng(9)
    q, k, v, do = (rng.standard_normal(s) for s in ((3, 2), (4, 2), (4, 2), (3, 2)))
    z = dropout.matrix(0.5, 2, 3, 4).astype(np.float64)
    h = 1e-6
    grads = reference.attention_backward(q, k, v, do, dropout_mask=z)
    for which, x in enumerate((q, k, v)):
        for idx in np.ndindex(*x.shape):
            args = [q.copy(), k.copy(), v.copy()]
            args[which][idx] += h
            up = (reference.attention(*args, dropout_mask=z)[0] * do).sum()
            args[which][idx] -= 2 * h
            down = (reference.attention(*args, dropout_mask=z)[0] * do).sum()
            assert abs((up - down) / (2 * h) - grads[which][idx]) < 1e-7 * np.abs(grads[which]).max()


def test_dropout_p_zero_is_no_dropout():
    q, k, v, _ = inputs(10, 10, 4)
    a = sim.run("flash2", q, k, v, dropout_p=0.0, seed=3)
    b = sim.run("flash2", q, k, v)
    assert np.array_equal(a.output, b.output) and a.ledger.to_dict() == b.ledger.to_dict()
