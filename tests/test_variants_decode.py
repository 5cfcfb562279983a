"""Flash-Decoding with GQA and on a paged KV cache: the ledger equals the closed form (pages whole but the last,
block-table entries), the output the float64 definition's."""

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms import iomodel_variants as iv
from sim.api import reference, tolerance
from sim.api import reference_variants as rv
from sim.core.dtypes import DTYPES
from sim.machine.iomodel import sum_counts
from tests.cli_runner import flashsim

window = st.one_of(st.none(), st.tuples(st.integers(-1, 9), st.integers(-1, 3)))


def counts(c):
    return c.hbm_read_bytes, c.hbm_write_bytes, c.flops, c.exps, c.elementwise


def within_bounds(r, ref, ref_lse):
    # FlashAttention-2's elementwise bound u·|ref| + 1e-5·max|ref|, stricter than sim.tolerance's worst case
    assert (np.abs(r.output.astype(np.float64) - ref) <= tolerance.output_bound("flash2", "fp16", ref, 0, 1, 1)).all()
    seen = np.isfinite(ref_lse)
    assert (np.isneginf(r.lse) == ~seen).all()
    assert np.abs(r.lse[seen] - ref_lse[seen]).max(initial=0) <= tolerance.lse_bound(ref_lse)


@settings(max_examples=50, deadline=None)
@given(
    B=st.integers(1, 3), Hkv=st.integers(1, 2), g=st.integers(1, 3), Nq=st.integers(1, 3), d=st.integers(1, 8),
    page_size=st.integers(1, 8), extra_pages=st.integers(0, 3), data=st.data(), splits=st.integers(1, 5),
    causal=st.booleans(), window=window, softcap=st.booleans(), alibi=st.booleans(),
)  # fmt: skip
def test_paged_decode(B, Hkv, g, Nq, d, page_size, extra_pages, data, splits, causal, window, softcap, alibi):
    per_seq = data.draw(st.integers(1, 4))
    seqlens = np.array(data.draw(st.lists(st.integers(1, per_seq * page_size), min_size=B, max_size=B)))
    num_pages = B * per_seq + extra_pages
    rng = np.random.default_rng(0)
    table = rng.permutation(num_pages)[: B * per_seq].reshape(B, per_seq)  # each sequence's pages, scattered
    k_cache, v_cache = (rng.standard_normal((num_pages, page_size, Hkv, d)).astype(np.float16) for _ in range(2))
    q = rng.standard_normal((B, g * Hkv, Nq, d)).astype(np.float16)
    options = dict(causal=causal, window=window, softcap=1.5 if softcap else None)
    options["alibi_slopes"] = np.linspace(0.4, 0.1, g * Hkv) if alibi else None
    r = sim.decode(q, k_cache, v_cache, block_table=table, cache_seqlens=seqlens, splits=splits, **options)
    variant = dict(group=g, window=window, softcap=softcap, alibi=alibi, page_size=page_size)
    pages = [-(-int(n) // page_size) for n in seqlens]
    closed = sum_counts(
        sum_counts(c for _, c in iv.decoding(Nq, int(n), d, 2, page_size, min(splits, p), causal, **variant)).times(Hkv)
        for n, p in zip(seqlens, pages, strict=True)
    )
    assert counts(r) == counts(closed)
    per_tensor = r.ledger.per_tensor()
    assert per_tensor["block_table"]["read"] == 4 * Hkv * sum(pages)  # int32 entries, each read once
    assert per_tensor["K_cache"]["read"] == 2 * d * Hkv * int(seqlens.sum())  # whole pages, the last partial
    within_bounds(r, *rv.paged(q, k_cache, v_cache, table, seqlens, **options))


@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 2), Hkv=st.integers(1, 2), g=st.integers(1, 4), Nq=st.integers(1, 3), Nk=st.integers(1, 40),
    d=st.integers(1, 8), splits=st.integers(1, 4), Bc=st.integers(1, 12), causal=st.booleans(), window=window,
)  # fmt: skip
def test_gqa_decode_reads_each_kv_head_once_per_split(B, Hkv, g, Nq, Nk, d, splits, Bc, causal, window):
    rng = np.random.default_rng(1)
    q = rng.standard_normal((B, g * Hkv, Nq, d)).astype(np.float16)
    k, v = (rng.standard_normal((B, Hkv, Nk, d)).astype(np.float16) for _ in range(2))
    splits = min(splits, Nk)
    r = sim.decode(q, k, v, splits=splits, block_cols=Bc, causal=causal, window=window)
    closed = sum_counts(c for _, c in iv.decoding(Nq, Nk, d, 2, Bc, splits, causal, group=g, window=window))
    assert counts(r) == counts(closed.times(B * Hkv))
    assert r.ledger.per_tensor()["K"]["read"] == 2 * Nk * d * B * Hkv
    within_bounds(r, *rv.attention(q, k, v, causal=causal, window=window))


def test_a_smaller_page_reads_fewer_padded_keys_but_more_table():
    # one sequence of 1000 keys: pages of 256 read 1000 keys and 4 entries, pages of 16 read 1000 keys and 63
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 1, 1, 64)).astype(np.float16)
    for page_size, entries in ((256, 4), (16, 63)):
        pages = -(-1024 // page_size)
        cache = rng.standard_normal((pages, page_size, 1, 64)).astype(np.float16)
        r = sim.decode(q, cache, cache, block_table=np.arange(pages)[None], cache_seqlens=[1000], splits=1)
        assert r.ledger.per_tensor()["block_table"]["read"] == 4 * entries
        assert r.ledger.per_tensor()["K_cache"]["read"] == 2 * 1000 * 64


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 300), st.sampled_from([4, 16, 64]), st.integers(1, 8),
       st.sampled_from(["fp16", "bf16", "fp32"]), st.sampled_from([1e-3, 1.0, 30.0, 1e4]), st.booleans())  # fmt: skip
def test_flash_decoding_is_within_its_stated_bound_at_any_scale(nq, nk, d, splits, dtype, scale, paged):
    """`flashsim decode` gave no verdict (red team 95): a wrong decode exited 0. Its bound, the ring's
    (`tolerance.decoding`), must hold for the library's own decode everywhere, contiguous and paged."""
    rng = np.random.default_rng(nq * 1000 + nk)
    q = rng.standard_normal((1, 1, nq, d)).astype(DTYPES[dtype])
    if paged:
        pages = -(-nk // 16)
        k, v = (rng.standard_normal((pages, 16, 1, d)).astype(q.dtype) for _ in range(2))
        table = rng.permutation(pages)[None]
        r = sim.decode(q, k, v, block_table=table, cache_seqlens=[nk], splits=min(splits, pages), scale=scale)
        ref, _ = rv.paged(q, k, v, table, [nk], scale=scale)
    else:
        k, v = (rng.standard_normal((1, 1, nk, d)).astype(q.dtype) for _ in range(2))
        r = sim.decode(q, k, v, splits=min(splits, nk), scale=scale)
        ref, _ = reference.attention(q, k, v, scale=scale)
    err = np.abs(r.output.astype(np.float64) - ref).max()
    assert err <= tolerance.decoding(r, q, k, v, ref).bound


def test_flashsim_decode_gives_a_verdict_and_its_exit_code():
    out = json.loads(flashsim("decode", "--nk", "512", "--heads", "2", "--page-size", "64", "--json").output)
    assert out["tolerance"]["within"] is True and out["simulated_max_abs_err"] <= out["tolerance"]["bound"]
    assert out["paged"]["within"] is True and out["paged"]["max_abs_err"] <= out["paged"]["bound"]
    shown = " ".join(flashsim("decode", "--nk", "512", "--heads", "2").output.split())
    assert "✓ within its bound (≤ " in shown


def test_a_numpy_integer_is_a_number_of_splits_too():
    """`sim.decode(…, splits=np.int64(4))` raised TypeError in the wording of its block sizes ("s" * np.bool_)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, 8)).astype(np.float32) for n in (2, 100, 100))
    assert sim.decode(q, k, v, splits=np.int64(4)).splits == 4
