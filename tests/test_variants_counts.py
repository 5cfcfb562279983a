"""GQA (both schedules), windows, ALiBi and softcap: every ledger equals its closed form, and every output the
float64 definition within `sim.api.tolerance`'s bounds, forward and backward."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms import iomodel_variants as iv
from sim.algorithms import registry
from sim.api import reference_variants as rv
from sim.api import tolerance
from sim.core.dtypes import dtype_name

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32]
side = st.one_of(st.none(), st.integers(-1, 12))


def inputs(B, Hq, Hkv, N, Nk, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, Hq, N, d)).astype(dtype)
    k, v = (rng.standard_normal((B, Hkv, Nk, d)).astype(dtype) for _ in range(2))
    return q, k, v


def counts(c):
    return c.hbm_read_bytes, c.hbm_write_bytes, c.flops, c.exps, c.elementwise


@settings(max_examples=120, deadline=None)
@given(
    B=st.integers(1, 2), Hkv=st.integers(1, 2), g=st.integers(1, 3), N=st.integers(1, 24), Nk=st.integers(1, 24),
    d=st.integers(1, 6), Br=st.integers(1, 10), Bc=st.integers(1, 10), dtype=st.sampled_from(DTYPES),
    causal=st.booleans(), window=st.one_of(st.none(), st.tuples(side, side)), softcap=st.booleans(),
    alibi=st.booleans(), pack=st.booleans(), dropout=st.booleans(),
)  # fmt: skip
def test_ledger_equals_closed_form(B, Hkv, g, N, Nk, d, Br, Bc, dtype, causal, window, softcap, alibi, pack, dropout):
    Hq = g * Hkv
    dropout = dropout and not pack  # the packed schedule draws no dropout mask (refused)
    q, k, v = inputs(B, Hq, Hkv, N, Nk, d, dtype)
    options = dict(causal=causal, window=window, softcap=2.0 if softcap else None, pack_gqa=pack)
    options["alibi_slopes"] = np.linspace(0.5, 0.1, Hq) if alibi else None
    options |= dict(dropout_p=0.25, seed=3) if dropout else {}
    r = sim.run("flash2", q, k, v, block_rows=Br, block_cols=Bc, sram_bytes=1 << 30, **options)
    s = np.dtype(dtype).itemsize
    variant = dict(causal=causal, window=window, softcap=softcap, alibi=alibi, dropout=dropout)
    assert counts(r) == counts(iv.gqa("flash2", B, Hq, Hkv, N, Nk, d, s, Br, Bc, pack_gqa=pack, **variant))
    programs = B * (Hkv if pack else Hq)
    assert r.skipped_tiles == programs * iv.skipped_tiles(N, Nk, Br, Bc, causal, window, g if pack else 1)
    grads = sim.backward(r, np.ones_like(q), block_rows=Bc, block_cols=Br, sram_bytes=1 << 30)
    closed = iv.gqa("flash2", B, Hq, Hkv, N, Nk, d, s, Bc, Br, pack_gqa=pack, backward=True, **variant)
    assert counts(grads) == counts(closed)
    assert grads.skipped_tiles == programs * iv.skipped_tiles(N, Nk, Bc, Br, causal, window, g if pack else 1)


@settings(max_examples=40, deadline=None)
@given(
    algorithm=st.sampled_from(["standard", "flash1"]), Hkv=st.integers(1, 2), g=st.integers(1, 3),
    N=st.integers(1, 20), Nk=st.integers(1, 20), d=st.integers(1, 6), Br=st.integers(1, 8), Bc=st.integers(1, 8),
    causal=st.booleans(),
)  # fmt: skip
def test_per_head_gqa_of_every_algorithm_equals_closed_form(algorithm, Hkv, g, N, Nk, d, Br, Bc, causal):
    q, k, v = inputs(1, g * Hkv, Hkv, N, Nk, d, np.float16)
    r = sim.run(algorithm, q, k, v, causal=causal, block_rows=Br, block_cols=Bc, sram_bytes=1 << 30)
    assert counts(r) == counts(iv.gqa(algorithm, 1, g * Hkv, Hkv, N, Nk, d, 2, Br, Bc, causal=causal))
    grads = sim.backward(r, np.ones_like(q), block_rows=Br, block_cols=Bc, sram_bytes=1 << 30)
    closed = iv.gqa(algorithm, 1, g * Hkv, Hkv, N, Nk, d, 2, Br, Bc, causal=causal, backward=True)
    assert counts(grads) == counts(closed)


def test_packed_gqa_reads_kv_once_per_group():
    # N = Br: one Q block per program. Per head, K and V are read Hq times; packed (g·N rows, Br = g·N), Hkv times
    B, Hq, Hkv, N, Nk, d = 1, 8, 2, 16, 64, 8
    q, k, v = inputs(B, Hq, Hkv, N, Nk, d, np.float16)
    heads = sim.run("flash2", q, k, v, block_rows=N, block_cols=16)
    packed = sim.run("flash2", q, k, v, block_rows=4 * N, block_cols=16, pack_gqa=True)
    kv = 2 * Nk * d * 2  # K and V of one K/V head, fp16
    assert heads.ledger.per_tensor()["K"]["read"] + heads.ledger.per_tensor()["V"]["read"] == Hq * kv
    assert packed.ledger.per_tensor()["K"]["read"] + packed.ledger.per_tensor()["V"]["read"] == Hkv * kv
    np.testing.assert_array_equal(heads.output, packed.output)


def test_window_skips_all_but_a_band_of_tiles():
    # N = Nk = 256, blocks of 32, window (32, 0): Q block i sees K/V blocks i − 1 and i only
    q, k, v = inputs(1, 1, 1, 256, 256, 8, np.float16)
    r = sim.run("flash2", q, k, v, window=(32, 0), block_rows=32, block_cols=32)
    assert r.skipped_tiles == 64 - (8 + 7)
    assert r.ledger.per_tensor()["K"]["read"] == (8 + 7) * 32 * 8 * 2


@pytest.mark.parametrize("Br,Bc,d", [(8, 8, 4), (8, 2, 8), (4, 16, 40)])
def test_softcap_backward_peak_equals_its_footprint(Br, Bc, d):
    q, k, v = inputs(1, 1, 1, 2 * Br, 2 * Bc, d, np.float32)
    r = sim.run("flash2", q, k, v, softcap=3.0, block_rows=Br, block_cols=Bc)
    g = sim.backward(r, np.ones_like(q), block_rows=Br, block_cols=Bc, sram_bytes=1 << 30)
    assert g.sram_peak_bytes == registry.need("flash2", Br, Bc, d, 4, backward=True, softcap=True)


@settings(max_examples=60, deadline=None)
@given(
    Hkv=st.integers(1, 2), g=st.integers(1, 3), N=st.integers(1, 20), Nk=st.integers(1, 20), d=st.integers(1, 8),
    Br=st.integers(1, 8), Bc=st.integers(1, 8), dtype=st.sampled_from(DTYPES), causal=st.booleans(),
    window=st.one_of(st.none(), st.tuples(side, side)), softcap=st.sampled_from([None, 0.5, 4.0]),
    alibi=st.booleans(), pack=st.booleans(), seed=st.integers(0, 99),
)  # fmt: skip
def test_numerics_within_the_derived_bounds(
    Hkv, g, N, Nk, d, Br, Bc, dtype, causal, window, softcap, alibi, pack, seed
):
    Hq = g * Hkv
    q, k, v = inputs(2, Hq, Hkv, N, Nk, d, dtype, seed)
    variant = dict(causal=causal, window=window, softcap=softcap)
    variant["alibi_slopes"] = 2.0 ** -np.arange(1, Hq + 1) if alibi else None
    r = sim.run("flash2", q, k, v, block_rows=Br, block_cols=Bc, pack_gqa=pack, **variant)
    ref, ref_lse = rv.attention(q, k, v, **variant)
    bound = tolerance.output_bound("flash2", dtype_name(q.dtype), ref, 0, 1, 1)  # u·|ref| + 1e-5·max|ref|
    assert (np.abs(r.output.astype(np.float64) - ref) <= bound).all()
    seen = np.isfinite(ref_lse)
    assert (np.isneginf(r.lse) == ~seen).all()
    assert np.abs(r.lse[seen] - ref_lse[seen]).max(initial=0) <= tolerance.lse_bound(ref_lse)
    if dtype is np.float32:  # gradients: stored in fp32, accumulated in float32 (`tolerance.gradient_bound`)
        do = np.random.default_rng(seed + 1).standard_normal(q.shape).astype(np.float32)
        grads = sim.backward(r, do, block_rows=Br, block_cols=Bc)
        # the bound is relative to max|ref|: where every row sees at most one key dQ ≡ 0 exactly, and float32's
        # dP − D cancels to ~1e-8·|dP| instead, so those draws are left out rather than held to a bound of 0
        assume(np.abs(rv.attention_backward(q, k, v, do, **variant)[0]).max() > 0)
        for got, want in zip(
            (grads.dq, grads.dk, grads.dv), rv.attention_backward(q, k, v, do, **variant), strict=True
        ):
            assert np.abs(got - want).max() <= tolerance.gradient_bound(want)


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
@pytest.mark.parametrize("causal", [False, True])
def test_per_head_gqa_numerics_of_every_algorithm(algorithm, causal):
    q, k, v = inputs(2, 6, 2, 13, 17, 8, np.float32, seed=5)
    r = sim.run(algorithm, q, k, v, causal=causal, block_rows=4, block_cols=5)
    ref, _ = rv.attention(q, k, v, causal=causal)
    assert (
        np.abs(r.output - ref).max()
        <= tolerance.FLOOR * np.abs(ref).max()  # fp32 storage: float32 arithmetic, 1e-5·max|ref|
    )
    do = np.random.default_rng(6).standard_normal(q.shape).astype(np.float32)
    grads = sim.backward(r, do, block_rows=4, block_cols=5)
    for got, want in zip(
        (grads.dq, grads.dk, grads.dv), rv.attention_backward(q, k, v, do, causal=causal), strict=True
    ):
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= tolerance.gradient_bound(want)


@pytest.mark.parametrize("pack", [False, True])
def test_count_with_kv_heads_equals_the_closed_form(pack):
    options = dict(causal=True, window=(40, 0), softcap=3.0, alibi_slopes=np.linspace(0.5, 0.1, 8), pack_gqa=pack)
    c = sim.count("flash2", n=100, nk=120, d=16, batch=3, heads=8, kv_heads=2, block_rows=32, block_cols=16, **options)
    variant = dict(causal=True, window=(40, 0), softcap=True, alibi=True, pack_gqa=pack)
    assert counts(c) == counts(iv.gqa("flash2", 3, 8, 2, 100, 120, 16, 2, 32, 16, **variant))
    assert c.heads == 24
    g = sim.count_backward("flash2", n=100, nk=120, d=16, batch=3, heads=8, kv_heads=2, block_rows=16, block_cols=32,
                           **options)  # fmt: skip
    assert counts(g) == counts(iv.gqa("flash2", 3, 8, 2, 100, 120, 16, 2, 16, 32, backward=True, **variant))


def sees(p, c, N, Nk, causal, window):
    """Whether query position p sees key c: the diagonal c = p + Nk − N, a window (left, right) around it."""
    diagonal = p + Nk - N
    left, right = window if window is not None else (None, None)
    right = 0 if causal and (right is None or right > 0) else right
    return (left is None or c >= diagonal - left) and (right is None or c <= diagonal + right)


@settings(max_examples=60, deadline=None)
@given(
    B=st.integers(1, 2), Hkv=st.integers(1, 2), g=st.integers(1, 3), N=st.integers(1, 20), Nk=st.integers(1, 20),
    d=st.integers(1, 4), s=st.sampled_from([2, 4]), Br=st.integers(1, 8), Bc=st.integers(1, 8), causal=st.booleans(),
    window=st.one_of(st.none(), st.tuples(st.integers(0, 12), st.integers(0, 12))),
)  # fmt: skip
def test_grouped_backward_counts_each_visit(B, Hkv, g, N, Nk, d, s, Br, Bc, causal, window):
    # the GPU kernels' schedule walked by hand: per K/V head and K/V block j, K_j and V_j read once and dK_j, dV_j
    # written once; per query head of the group and Q block i that some (row, key) pair of the tile lets meet,
    # Q_i, dO_i, dQ_i read, L_i, D_i (float32) read, dQ_i written back; the pre-pass reads O, dO and writes D, dQ = 0
    reads = writes = 0
    for j0 in range(0, Nk, Bc):
        cols = min(Bc, Nk - j0)
        reads, writes = reads + 2 * s * cols * d, writes + 2 * s * cols * d
        for i0 in range(0, N, Br):
            rows = min(Br, N - i0)
            if any(sees(p, c, N, Nk, causal, window) for p in range(i0, i0 + rows) for c in range(j0, j0 + cols)):
                reads, writes = reads + g * (3 * s * rows * d + 2 * 4 * rows), writes + g * s * rows * d
    (_, pre), (_, main) = iv.grouped_backward(B, g * Hkv, Hkv, N, Nk, d, s, Br, Bc, causal=causal, window=window)
    assert (main.hbm_read_bytes, main.hbm_write_bytes) == (B * Hkv * reads, B * Hkv * writes)
    assert (pre.hbm_read_bytes, pre.hbm_write_bytes) == (B * g * Hkv * 2 * s * N * d, B * g * Hkv * (s * d + 4) * N)
    # the arithmetic is the per-head pass's: the group shares bytes, not work
    per_head = iv.gqa("flash2", B, g * Hkv, Hkv, N, Nk, d, s, Br, Bc, causal=causal, window=window, backward=True)
    assert main.flops + pre.flops == per_head.flops and main.exps == per_head.exps
