"""The float64 reference in row blocks: the textbook formulas, and never an N × Nk matrix held whole."""

import tracemalloc

import numpy as np
import pytest

from sim.api import reference


def textbook(q, k, v, causal=False, scale=None):
    """softmax(τ q kᵀ) v and its log-sum-exp, written out over the whole matrix (small shapes only)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    N, Nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = (1 / np.sqrt(d) if scale is None else scale) * q @ np.swapaxes(k, -1, -2)
    if causal:  # query r sees key c iff c ≤ r + Nk − N (bottom-right)
        s = np.where(np.arange(Nk)[None, :] <= np.arange(N)[:, None] + Nk - N, s, -np.inf)
    o, lse = np.zeros(q.shape), np.full(q.shape[:-1], -np.inf)
    for idx in np.ndindex(s.shape[:-1]):
        row = s[idx]
        if np.isfinite(row).any():
            w = np.exp(row - row.max())
            o[idx] = w @ v[idx[:-1]] / w.sum()
            lse[idx] = row.max() + np.log(w.sum())
    return o, lse


def textbook_backward(q, k, v, do, causal=False):
    """The chain rule through the whole P, dP and dS."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    N, Nk, d = q.shape[0], k.shape[0], q.shape[1]
    tau = 1 / np.sqrt(d)
    s = tau * q @ k.T
    if causal:
        s = np.where(np.arange(Nk)[None, :] <= np.arange(N)[:, None] + Nk - N, s, -np.inf)
    m = np.max(s, axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0
    e = np.exp(s - m)
    p = np.divide(e, e.sum(1, keepdims=True), out=np.zeros_like(e), where=e.sum(1, keepdims=True) > 0)
    dp = do @ v.T
    ds = p * (dp - (p * dp).sum(1, keepdims=True))
    return tau * ds @ k, tau * ds.T @ q, p.T @ do


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("N,Nk,d", [(37, 53, 8), (53, 37, 8), (300, 7, 4)])
def test_blocks_of_rows_give_the_textbook_attention(N, Nk, d, causal, monkeypatch):
    monkeypatch.setattr(reference, "BLOCK_ELEMENTS", 64)  # a few rows a block: many blocks, a ragged last one
    rng = np.random.default_rng(N)
    q, k, v = (rng.standard_normal((2, n, d)) for n in (N, Nk, Nk))
    o, lse = reference.attention(q, k, v, causal=causal)
    want_o, want_lse = textbook(q, k, v, causal)
    assert np.abs(o - want_o).max() < 1e-12
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse))
    assert np.abs(lse[np.isfinite(lse)] - want_lse[np.isfinite(want_lse)]).max() < 1e-12


@pytest.mark.parametrize("causal", [False, True])
def test_blocks_of_rows_give_the_textbook_gradients(causal, monkeypatch):
    monkeypatch.setattr(reference, "BLOCK_ELEMENTS", 100)
    rng = np.random.default_rng(1)
    q, k, v, do = (rng.standard_normal((n, 6)) for n in (41, 29, 29, 41))
    got = reference.attention_backward(q, k, v, do, causal=causal)
    for g, w in zip(got, textbook_backward(q, k, v, do, causal), strict=True):
        assert np.abs(g - w).max() < 1e-12


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_reference_never_holds_the_whole_score_matrix():
    N, d = 4096, 8
    q, k, v = (np.random.default_rng(i).standard_normal((N, d)).astype(np.float16) for i in range(3))
    whole = 8 * N * N  # one N × N float64 matrix: 128 MiB
    assert peak_bytes(lambda: reference.attention(q, k, v, causal=True)) < whole / 2
    assert peak_bytes(lambda: reference.attention_backward(q, k, v, q)) < whole / 2
