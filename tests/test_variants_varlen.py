"""Packed variable-length batches: the ledger is the sum of each sequence's closed form (no padding moved), the
output the float64 definition's, and a batch of equal lengths costs what its padded form does."""

import numpy as np
from hypothesis import given, settings
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
    assert r.ledger.per_tensor()["Q"]["read"] == 2 * cq[-1] * Hq * d  # Q read once, no padded row
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
