"""Packed variable-length batches: the ledger is the sum of each sequence's closed form (no padding moved), the
output the float64 definition's, and a batch of equal lengths costs what its padded form does; the same for the
backward (`sim.backward(packed, do)`), its gradients against the definition written out here."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms import iomodel_variants as iv
from sim.api import reference_variants as rv
from sim.api import tolerance


def packed(lens_q, lens_k, Hq, Hkv, d, seed=0):
    rng = np.random.default_rng(seed)
    cq, ck = np.cumsum([0, *lens_q]), np.cumsum([0, *lens_k])
    q = rng.standard_normal((cq[-1], Hq, d)).astype(np.float16)
    k, v = (rng.standard_normal((ck[-1], Hkv, d)).astype(np.float16) for _ in range(2))
    return q, k, v, cq, ck


def blocks_seeing_keys(n, nk, g, Br, pack, causal, window) -> int:
    """Rows of one K/V head's Q blocks (g·n rows packed, position r // g; or one query head's n) in which some row
    sees some key, from the mask's definition: position p sees key c ∈ [0, nk) iff
    p + nk − n − left ≤ c ≤ p + nk − n + right (a side of −1 or None unbounded; causal: right = min(right, 0))."""
    left, right = (None, None) if window is None else (None if w == -1 else w for w in window)
    if causal:
        right = 0 if right is None else min(right, 0)
    lo = [p + nk - n - left if left is not None else 0 for p in range(n)]
    hi = [p + nk - n + right if right is not None else nk - 1 for p in range(n)]
    position = [r // g for r in range(g * n)] if pack else list(range(n))
    blocks = [position[r0 : r0 + Br] for r0 in range(0, len(position), Br)]
    return sum(len(b) for b in blocks if any(max(lo[p], 0) <= min(hi[p], nk - 1) for p in b))


@settings(max_examples=50, deadline=None)
@given(
    lens=st.lists(st.tuples(st.integers(1, 20), st.integers(1, 20)), min_size=1, max_size=4), Hkv=st.integers(1, 2),
    g=st.integers(1, 2), d=st.integers(1, 6), Br=st.integers(1, 8), Bc=st.integers(1, 8), causal=st.booleans(),
    window=st.one_of(st.none(), st.tuples(st.integers(-1, 6), st.integers(-1, 6))), softcap=st.booleans(),
    alibi=st.booleans(), pack=st.booleans(),
)  # fmt: skip
def test_packed_ledger_and_output(lens, Hkv, g, d, Br, Bc, causal, window, softcap, alibi, pack):
    lens_q, lens_k = [a for a, _ in lens], [b for _, b in lens]
    Hq = g * Hkv
    q, k, v, cq, ck = packed(lens_q, lens_k, Hq, Hkv, d)
    options = dict(causal=causal, window=window, softcap=1.5 if softcap else None)
    options["alibi_slopes"] = np.linspace(0.3, 0.05, Hq) if alibi else None
    r = sim.run_varlen("flash2", q, k, v, cq, ck, block_rows=Br, block_cols=Bc, pack_gqa=pack, **options)
    variant = dict(causal=causal, window=window, softcap=softcap, alibi=alibi)
    closed = [
        iv.gqa("flash2", 1, Hq, Hkv, n, nk, d, 2, Br, Bc, pack_gqa=pack, **variant)
        for n, nk in zip(lens_q, lens_k, strict=True)
    ]
    assert r.hbm_read_bytes == sum(c.hbm_read_bytes for c in closed)
    assert r.hbm_write_bytes == sum(c.hbm_write_bytes for c in closed)
    assert (r.flops, r.exps, r.elementwise) == tuple(
        sum(getattr(c, f) for c in closed) for f in ("flops", "exps", "elementwise")
    )
    rows = sum(blocks_seeing_keys(n, nk, g, Br, pack, causal, window) for n, nk in lens)
    assert r.ledger.per_tensor()["Q"]["read"] == 2 * rows * Hkv * (1 if pack else g) * d  # once, no padded row
    ref, ref_lse = rv.varlen(q, k, v, cq, ck, **options)
    # FlashAttention-2's elementwise bound u·|ref| + 1e-5·max|ref|, stricter than sim.tolerance's worst case
    assert (np.abs(r.output.astype(np.float64) - ref) <= tolerance.output_bound("flash2", "fp16", ref, 0, 1, 1)).all()
    seen = np.isfinite(ref_lse)
    assert (np.isneginf(r.lse) == ~seen).all()
    assert np.abs(r.lse[seen] - ref_lse[seen]).max(initial=0) <= tolerance.lse_bound(ref_lse)


def test_padding_costs_what_the_longest_sequence_sets():
    # lengths 100, 2000, 37 against a batch padded to 2000: packed reads Q and writes O for 2137 rows, padded 6000
    lens = [100, 2000, 37]
    Br = Bc = 64
    r = sim.count("flash2", n=2000, d=64, batch=3, heads=1, block_rows=Br, block_cols=Bc)
    q, k, v, cq, ck = packed(lens, lens, 1, 1, 64)
    p = sim.run_varlen("flash2", q, k, v, cq, ck, block_rows=Br, block_cols=Bc)
    assert p.padded_hbm_bytes == r.hbm_bytes
    assert p.ledger.per_tensor()["O"]["write"] == 2 * 2137 * 64
    assert r.ledger.per_tensor()["O"]["write"] == 2 * 6000 * 64
    assert p.hbm_bytes < p.padded_hbm_bytes / 2


def test_equal_lengths_cost_what_padding_does():
    q, k, v, cq, ck = packed([16, 16, 16], [24, 24, 24], 2, 1, 8)
    p = sim.run_varlen("flash2", q, k, v, cq, ck, block_rows=8, block_cols=8, causal=True)
    assert p.hbm_bytes == p.padded_hbm_bytes


def definition_backward(q, k, v, do, *, causal=False, window=None, slopes=None, softcap=None):
    """dq (N, Hq, d), dk, dv (Nk, Hkv, d) of ONE sequence in float64, written from the definition head by head: an
    explicit mask of the keys query i sees (bottom-right), softcap then ALiBi on S, and the chain rule through them."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    (N, Hq, d), Nk, Hkv = q.shape, k.shape[0], k.shape[1]
    tau, g = 1 / np.sqrt(d), Hq // Hkv
    left, right = (-1, -1) if window is None else window
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    sizes = [np.zeros(x.shape) for x in (q, k, v)]  # each gradient's sum over the magnitudes of its terms
    seen = np.zeros((N, Nk), bool)
    for i in range(N):
        for j in range(Nk):
            diagonal = i + Nk - N  # query i's own key, aligned bottom-right
            seen[i, j] = (not causal or j <= diagonal) and (left == -1 or j >= diagonal - left)
            seen[i, j] &= right == -1 or j <= diagonal + right
    distance = np.abs(np.arange(N)[:, None] + Nk - N - np.arange(Nk)[None, :])
    for h in range(Hq):
        K, V, dO = k[:, h // g], v[:, h // g], do[:, h]
        S = tau * q[:, h] @ K.T  # (N, Nk)
        T = np.tanh(S / softcap) if softcap else None
        S = softcap * T if softcap else S
        S = S - (slopes[h] * distance if slopes is not None else 0)
        m = np.where(seen, S, -np.inf).max(axis=1, keepdims=True)  # each row's largest visible score
        E = np.where(seen, np.exp(S - np.where(seen.any(axis=1, keepdims=True), m, 0.0)), 0.0)
        total = E.sum(axis=1, keepdims=True)
        P = np.divide(E, total, out=np.zeros_like(E), where=total > 0)
        dP = dO @ V.T
        dS = P * (dP - (P * dP).sum(axis=1, keepdims=True))
        dS = dS * (1 - T**2) if softcap else dS
        dq[:, h] = tau * dS @ K
        dk[:, h // g] += tau * dS.T @ q[:, h]
        dv[:, h // g] += P.T @ dO
        size = np.abs(P) * (np.abs(dP) + np.abs(P * dP).sum(axis=1, keepdims=True))  # |dS| before it cancels
        sizes[0][:, h] = tau * size @ np.abs(K)
        sizes[1][:, h // g] += tau * size.T @ np.abs(q[:, h])
        sizes[2][:, h // g] += P.T @ np.abs(dO)
    return (dq, dk, dv), sizes


LENS = st.lists(st.tuples(st.integers(1, 14), st.integers(1, 14)), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(
    lens=LENS, Hkv=st.integers(1, 2), g=st.integers(1, 2), d=st.integers(1, 6), Br=st.integers(1, 8),
    Bc=st.integers(1, 8), causal=st.booleans(), window=st.one_of(st.none(), st.tuples(*[st.integers(-1, 6)] * 2)),
    softcap=st.booleans(), alibi=st.booleans(), pack=st.booleans(), seed=st.integers(0, 99),
)  # fmt: skip
def test_packed_backward_ledger_and_gradients(lens, Hkv, g, d, Br, Bc, causal, window, softcap, alibi, pack, seed):
    options = dict(causal=causal, window=window, softcap=1.5 if softcap else None)
    options["alibi_slopes"] = np.linspace(0.3, 0.05, g * Hkv) if alibi else None
    check_packed_backward("flash2", np.float32, lens, Hkv, g, d, Br, Bc, pack, seed, **options)


@settings(max_examples=40, deadline=None)
@given(
    lens=LENS, Hkv=st.integers(1, 2), g=st.integers(1, 2), d=st.integers(1, 6), Br=st.integers(1, 8),
    Bc=st.integers(1, 8), causal=st.booleans(), seed=st.integers(0, 99),
    run=st.sampled_from([("flash1", np.float32), ("flash1", np.float16), ("flash2", np.float16)]),
)  # fmt: skip
def test_packed_backward_of_flash1_and_of_fp16(lens, Hkv, g, d, Br, Bc, causal, seed, run):
    check_packed_backward(*run, lens, Hkv, g, d, Br, Bc, False, seed, causal=causal)


def check_packed_backward(algorithm, dtype, lens, Hkv, g, d, Br, Bc, pack, seed, **options):
    """The packed backward's ledger against the sum of each sequence's closed form, and (fp32) its gradients
    against `definition_backward` sequence by sequence, within `tolerance.gradient_bound`."""
    lens_q, lens_k = [a for a, _ in lens], [b for _, b in lens]
    Hq, s = g * Hkv, np.dtype(dtype).itemsize
    q, k, v, cq, ck = packed(lens_q, lens_k, Hq, Hkv, d, seed)
    q, k, v = (x.astype(dtype) for x in (q, k, v))
    r = sim.run_varlen(algorithm, q, k, v, cq, ck, block_rows=Br, block_cols=Bc, pack_gqa=pack, **options)
    do = np.random.default_rng(seed + 1).standard_normal(q.shape).astype(dtype)
    grads = sim.backward(r, do, block_rows=Bc, block_cols=Br, sram_bytes=1 << 30)
    variant = dict(causal=options["causal"], window=options.get("window"))
    variant |= dict(softcap=options.get("softcap") is not None, alibi=options.get("alibi_slopes") is not None)
    closed = [  # the sum over sequences of each one's backward closed form (its own rows only)
        iv.gqa(algorithm, 1, Hq, Hkv, n, nk, d, s, Bc, Br, pack_gqa=pack, backward=True, **variant)
        for n, nk in zip(lens_q, lens_k, strict=True)
    ]
    assert grads.hbm_read_bytes == sum(c.hbm_read_bytes for c in closed)
    assert grads.hbm_write_bytes == sum(c.hbm_write_bytes for c in closed)
    assert (grads.flops, grads.exps, grads.elementwise) == tuple(
        sum(getattr(c, f) for c in closed) for f in ("flops", "exps", "elementwise")
    )
    assert (grads.dq.shape, grads.dk.shape, grads.dv.shape) == (q.shape, k.shape, v.shape)
    if dtype is not np.float32:  # gradients are held to `tolerance.gradient_bound` when stored in fp32
        return
    want, sizes = [np.empty(x.shape) for x in (q, k, v)], [np.empty(x.shape) for x in (q, k, v)]
    for a0, a1, b0, b1 in zip(cq[:-1], cq[1:], ck[:-1], ck[1:], strict=True):
        one, size = definition_backward(q[a0:a1], k[b0:b1], v[b0:b1], do[a0:a1], causal=options["causal"],
                                        window=options.get("window"), slopes=options.get("alibi_slopes"),
                                        softcap=options.get("softcap"))  # fmt: skip
        want[0][a0:a1], want[1][b0:b1], want[2][b0:b1] = one
        sizes[0][a0:a1], sizes[1][b0:b1], sizes[2][b0:b1] = size
    # `gradient_bound` is relative to max|ref|; float32 errs relative to the terms summed. Where a gradient cancels
    # to far below its terms (dQ ≡ 0 when rows see one key; dS's rows sum to 0) that bound does not hold, for
    # packed and unpacked batches alike, so those draws are left out rather than held to it
    assume(all(np.abs(w).max() >= 0.1 * z.max() for w, z in zip(want, sizes, strict=True)))
    for got, expected in zip((grads.dq, grads.dk, grads.dv), want, strict=True):
        assert np.abs(got - expected).max() <= tolerance.gradient_bound(expected)


def test_packed_backward_writes_no_padded_row():
    # lengths 5, 30, 2 with blocks of 8: dK and dV are written once per key row of the 37, never for padding to 30
    q, k, v, cq, ck = packed([5, 30, 2], [5, 30, 2], 2, 2, 4)
    r = sim.run_varlen("flash2", q, k, v, cq, ck, block_rows=8, block_cols=8)
    grads = sim.backward(r, np.ones_like(q), block_rows=8, block_cols=8)
    for name in ("dK", "dV"):
        assert grads.ledger.per_tensor()[name]["write"] == 2 * 37 * 2 * 4
    assert grads.heads == 3 * 2 and grads.n == 30


def test_packed_backward_traces_the_first_sequence():
    q, k, v, cq, ck = packed([6, 9], [7, 3], 1, 1, 4)
    r = sim.run_varlen("flash2", q, k, v, cq, ck, block_rows=4, block_cols=4)
    grads = sim.backward(r, np.ones_like(q), record="steps")
    assert (grads.trace.config["n"], grads.trace.config["nk"]) == (6, 7)


@settings(max_examples=30, deadline=None)
@given(shape=st.tuples(st.integers(1, 12), st.integers(1, 3), st.integers(1, 5)))
def test_packed_backward_refuses_a_do_of_another_shape(shape):
    q, k, v, cq, ck = packed([4, 6], [4, 6], 2, 1, 3)
    r = sim.run_varlen("flash2", q, k, v, cq, ck)
    assume(shape != q.shape)
    with pytest.raises(sim.InputError, match=r"^do: shape \(.+\) must equal q's \(10, 2, 3\)$"):
        sim.backward(r, np.ones(shape, np.float16))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_packed_backward_refuses_a_non_finite_do(bad):
    q, k, v, cq, ck = packed([4, 6], [4, 6], 1, 1, 3)
    do = np.ones_like(q)
    do[7, 0, 1] = bad
    with pytest.raises(sim.InputError, match=r"^do: contains NaN or Inf"):
        sim.backward(sim.run_varlen("flash2", q, k, v, cq, ck), do)


def test_packed_backward_refusals_name_the_argument():
    q, k, v, cq, ck = packed([4, 6], [4, 6], 1, 1, 3)
    with pytest.raises(sim.InputError, match=r"^result: a packed batch of standard keeps no statistics"):
        sim.backward(sim.run_varlen("standard", q, k, v, cq, ck), np.ones_like(q))
    with pytest.raises(sim.InputError, match=r"^causal: a Result carries the forward's"):
        sim.backward(sim.run_varlen("flash2", q, k, v, cq, ck), np.ones_like(q), causal=True)
