"""Rung 8 (`gpu.decode`, Flash-Decoding) against a float64 NumPy reference built from the definition, on the
FlashAttention project's criterion (gpu.lab.checks): max|o − ref| ≤ 2·max|o_standard − ref| + 1e-3 with o_standard
standard attention in the storage dtype (S and P rounded to it), lse within LSE_ATOL + LSE_RTOL·|lse|, −∞ exactly
where a row sees no key, and no output element left unwritten (the memory the outputs take is filled with NaN first).
Contiguous and paged caches (ragged cache_seqlens, pages out of order), GQA ratios 1/4/8, 1…8 query rows, causal and
not, fp16/bf16, d = 64 and 128, splits from the occupancy model and forced. The input checks and the conventions shared
with sim.decode run without a GPU."""

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu
import sim
from gpu import decode_launch, decoding, geometry, pages, registry
from gpu.lab.checks import LSE_ATOL, LSE_RTOL
from sim.core.errors import InputError
from sim.machine import hardware

STORAGE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def round_to(x, dtype: str) -> np.ndarray:
    """x rounded to the storage dtype, back in float64."""
    return np.asarray(x, np.float32).astype(STORAGE[dtype]).astype(np.float64)


def sequence_keys(k, b: int, h: int, seqlen: int, table=None) -> np.ndarray:
    """The keys (seqlen, d) K/V head h of sequence b reads: contiguous k[b, h], or row j of page table[b, j // P]."""
    if table is None:
        return k[b, h, :seqlen]
    page_size = k.shape[1]
    j = np.arange(seqlen)
    return k[table[b, j // page_size], j % page_size, h]


def reference(q, k, v, *, causal, scale, table=None, seqlens=None, dtype=None):
    """(o, lse) in float64 from the definition; with `dtype`, standard attention in that dtype (S, P, O rounded)."""
    B, Hq, Nq = q.shape[:3]
    Hkv = k.shape[1] if table is None else k.shape[2]
    o, lse = np.zeros(q.shape), np.full(q.shape[:3], -np.inf)
    for b in range(B):
        n_keys = k.shape[2] if table is None else int(seqlens[b])
        for h in range(Hq):
            K = sequence_keys(k, b, h // (Hq // Hkv), n_keys, table).astype(np.float64)
            V = sequence_keys(v, b, h // (Hq // Hkv), n_keys, table).astype(np.float64)
            S = q[b, h].astype(np.float64) @ K.T  # (Nq, seqlen)
            S = scale * (round_to(S, dtype) if dtype else S)
            hidden = np.arange(n_keys)[None, :] > np.arange(Nq)[:, None] + n_keys - Nq  # bottom-right
            if causal:
                S = np.where(hidden, -np.inf, S)
            m = S.max(axis=1, keepdims=True)
            seen = np.isfinite(m[:, 0])
            P = np.exp(S - np.where(np.isfinite(m), m, 0.0))
            ell = P.sum(axis=1, keepdims=True)
            P = P / np.where(ell > 0, ell, 1.0)
            O = (round_to(P, dtype) if dtype else P) @ V
            o[b, h] = round_to(O, dtype) if dtype else O
            lse[b, h] = np.where(seen, m[:, 0] + np.log(np.where(seen, ell[:, 0], 1.0)), -np.inf)
    return o, lse


def random_case(rng, B, Hq, Hkv, Nq, d, dtype, *, seqlens=None, page_size=None, nk=None):
    """q and a contiguous (nk keys) or paged cache (seqlens, page_size; its pages shuffled, some left unused)."""
    q = rng.standard_normal((B, Hq, Nq, d)).astype(STORAGE[dtype])
    if seqlens is None:
        k, v = (rng.standard_normal((B, Hkv, nk, d)).astype(STORAGE[dtype]) for _ in range(2))
        return q, k, v, None
    pages = [math.ceil(n / page_size) for n in seqlens]
    num_pages = sum(pages) + 3
    order = rng.permutation(num_pages)
    table = np.full((B, max(pages) + 1), -7, np.int32)  # entries past a sequence's pages are never read
    used = 0
    for b, n in enumerate(pages):
        table[b, :n] = order[used : used + n]
        used += n
    k, v = (rng.standard_normal((num_pages, page_size, Hkv, d)).astype(STORAGE[dtype]) for _ in range(2))
    return q, k, v, table


def run_and_judge(q, k, v, table, seqlens, *, causal, dtype, splits=None, fused=True, merge=None):
    cupy = pytest.importorskip("cupy")
    scale = 1 / math.sqrt(q.shape[-1])
    device = [cupy.asarray(x.view(np.uint16)).view(STORAGE[dtype]) for x in (q, k, v)]
    for shape, dt in ((q.shape, cupy.float16), (q.shape[:3], cupy.float32)):  # the pool hands this memory out next
        cupy.full(shape, cupy.nan, dt)
    kw = {} if table is None else {"block_table": cupy.asarray(table), "cache_seqlens": cupy.asarray(seqlens)}
    if fused and merge is None:
        o, lse = gpu.decode(*device, causal=causal, splits=splits, return_lse=True, check=True, **kw)
    else:  # the combine as its own kernel, or merged another way than gpu.decode's (gpu.lab times them)
        plan = decoding.prepare(*device, kw.get("block_table"), kw.get("cache_seqlens"), causal, None, splits)
        o, lse = decoding.launch(cupy, plan, fused=fused, merge=merge)
    o = o.view(cupy.uint16).get().view(STORAGE[dtype]).astype(np.float64)
    lse = lse.get().astype(np.float64)
    o_ref, lse_ref = reference(q, k, v, causal=causal, scale=scale, table=table, seqlens=seqlens)
    o_std, _ = reference(q, k, v, causal=causal, scale=scale, table=table, seqlens=seqlens, dtype=dtype)
    assert not np.isnan(o).any() and not np.isnan(lse).any(), "unwritten output elements"
    err, bound = np.abs(o - o_ref).max(), 2 * np.abs(o_std - o_ref).max() + 1e-3
    assert err <= bound, f"max|o − ref| {err:.2e} > {bound:.2e}"
    seen = np.isfinite(lse_ref)
    assert np.array_equal(np.isneginf(lse), ~seen)
    assert (np.abs(lse[seen] - lse_ref[seen]) <= LSE_ATOL + LSE_RTOL * np.abs(lse_ref[seen])).all()
    assert (o[~seen] == 0).all()


# (B, Hq, Hkv, Nq, d): GQA ratios 1, 4, 8 and query rows 1 … 8 (speculative decoding), up to 64 packed rows
GROUPS = [(2, 4, 4, 1, 128), (1, 8, 2, 3, 64), (3, 16, 2, 1, 128), (2, 8, 1, 8, 128), (1, 4, 1, 5, 64)]


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", GROUPS, ids=lambda s: "x".join(map(str, s)))
def test_paged_ragged_shuffled(shape, dtype, causal):
    B, Hq, Hkv, Nq, d = shape
    rng = np.random.default_rng(sum(shape))
    seqlens = rng.integers(1, 1500, B).astype(np.int32)
    seqlens[0] = max(Nq - 2, 1)  # causal: rows that see no key when Nq exceeds the sequence
    q, k, v, table = random_case(rng, B, Hq, Hkv, Nq, d, dtype, seqlens=seqlens, page_size=64)
    run_and_judge(q, k, v, table, seqlens, causal=causal, dtype=dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", GROUPS, ids=lambda s: "x".join(map(str, s)))
def test_contiguous(shape, dtype, causal):
    B, Hq, Hkv, Nq, d = shape
    rng = np.random.default_rng(sum(shape) + 1)
    q, k, v, _ = random_case(rng, B, Hq, Hkv, Nq, d, dtype, nk=2000 + 17 * Nq)
    run_and_judge(q, k, v, None, None, causal=causal, dtype=dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "separate"])
@pytest.mark.parametrize("splits", [1, 2, 7, 16, 128])
@pytest.mark.parametrize("page_size", [16, 100, 256, None])
def test_forced_splits(splits, page_size, fused):
    rng = np.random.default_rng(splits + (page_size or 0))
    B, Hq, Hkv, Nq, d = 3, 8, 2, 2, 128
    if page_size is None:
        q, k, v, table = random_case(rng, B, Hq, Hkv, Nq, d, "bfloat16", nk=1111)
        seqlens = None
    else:  # 128 splits exceed most sequences' pages: each takes min(splits, its pages), as in sim.api.paged
        seqlens = np.array([3000, 1, 777], np.int32)
        q, k, v, table = random_case(rng, B, Hq, Hkv, Nq, d, "bfloat16", seqlens=seqlens, page_size=page_size)
    run_and_judge(q, k, v, table, seqlens, causal=True, dtype="bfloat16", splits=splits, fused=fused)


@pytest.mark.gpu
@pytest.mark.parametrize("merge", decode_launch.MERGES)
@pytest.mark.parametrize("splits", [4, 16])
@pytest.mark.parametrize("page_size", [16, None])
def test_cluster_spread_and_ticket_merge_alike(page_size, splits, merge):
    """Short splits merge as one cluster of the group's blocks (CLUSTER_KEYS), by all the group's blocks of a
    cooperative grid, or by the last block's ticket: the same problem each way, judged against float64. Contiguous
    (1111 keys: 278 or 70 a split), and paged in pages of 16 (70, 1 and 7 pages: 18 or 5 pages a split the longest;
    one sequence of one page, where split 0 writes o itself, and one of fewer pages than 16 splits, whose blocks past
    its pages read nothing and still merge their share)."""
    rng = np.random.default_rng(splits + (page_size or 0))
    if page_size is None:
        q, k, v, table = random_case(rng, 2, 16, 2, 1, 128, "float16", nk=1111)
        seqlens = None
    else:
        seqlens = np.array([1111, 1, 100], np.int32)
        q, k, v, table = random_case(rng, 3, 16, 2, 1, 128, "float16", seqlens=seqlens, page_size=page_size)
    run_and_judge(q, k, v, table, seqlens, causal=True, dtype="float16", splits=splits, merge=merge)


@pytest.mark.gpu
@pytest.mark.parametrize("merge", ["spread", "ticket"])
@pytest.mark.parametrize("splits", [3, 17, 40])
@pytest.mark.parametrize("page_size", [16, None])
def test_spread_and_ticket_merge_alike(page_size, splits, merge):
    """All of a group's blocks merge it (more splits than one batch of SPREAD_LOADS: 17, 40) or the last one does,
    paged (ragged: some sequences have fewer pages than splits, one a single page) and contiguous, causal, bf16."""
    rng = np.random.default_rng(splits + (page_size or 0))
    B, Hq, Hkv, Nq, d = 3, 8, 2, 2, 128
    if page_size is None:
        q, k, v, table = random_case(rng, B, Hq, Hkv, Nq, d, "bfloat16", nk=5000)  # splits of ≥ 125 keys
        seqlens = None
    else:
        seqlens = np.array([3000, 1, 300], np.int32)
        q, k, v, table = random_case(rng, B, Hq, Hkv, Nq, d, "bfloat16", seqlens=seqlens, page_size=page_size)
    run_and_judge(q, k, v, table, seqlens, causal=True, dtype="bfloat16", splits=splits, merge=merge)


@pytest.mark.gpu
def test_workspace_reused_across_calls():
    """Calls of one shape share the partials and tickets (the fused combine sets them back): each answer is its own."""
    rng = np.random.default_rng(5)
    for _ in range(3):
        q, k, v, _ = random_case(rng, 2, 8, 2, 1, 128, "float16", nk=3000)
        run_and_judge(q, k, v, None, None, causal=False, dtype="float16", splits=9)
        seqlens = rng.integers(1, 900, 2).astype(np.int32)
        q, k, v, table = random_case(rng, 2, 8, 2, 1, 128, "float16", seqlens=seqlens, page_size=16)
        run_and_judge(q, k, v, table, seqlens, causal=False, dtype="float16", splits=9)


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [1, 4])
def test_o_without_lse_is_o_with_it(splits):
    """Without return_lse the kernel writes lse into the workspace: o is the same, bit for bit, and judged right."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(11)
    q, k, v, _ = random_case(rng, 2, 8, 2, 1, 128, "float16", nk=1000)
    run_and_judge(q, k, v, None, None, causal=True, dtype="float16", splits=splits)
    q, k, v = (cupy.asarray(x) for x in (q, k, v))
    o, _ = gpu.decode(q, k, v, causal=True, splits=splits, return_lse=True)
    assert cupy.array_equal(gpu.decode(q, k, v, causal=True, splits=splits), o)


@pytest.mark.gpu
def test_cached_checks_still_refuse_what_differs():
    """prepare caches its checks by what they read: a repeated call takes the cache (the same answer), and a call that
    differs in any checked property is checked again and refused."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(9)
    q, k, v, _ = random_case(rng, 2, 8, 2, 1, 64, "float16", nk=700)
    q, k, v = (cupy.asarray(x) for x in (q, k, v))
    first, again = gpu.decode(q, k, v, splits=3), gpu.decode(q, k, v, splits=3)
    assert cupy.array_equal(first, again)
    for kw, match in (
        ({"k": k[:, :, ::2]}, "k: must be C-contiguous"),
        ({"k": k.astype(cupy.float32)}, "k: dtype float32 is not supported"),
        ({"v": v[:, :, :-1].copy()}, "k, v: shapes must be equal"),
        ({"scale": float("nan")}, "scale: expected a positive finite"),
        ({"scale": [1.0]}, "scale: expected a positive finite"),
        ({"splits": 0}, "splits: expected an integer"),
        ({"splits": 701}, "splits: expected an integer"),
        ({"causal": 1}, "causal: expected True or False"),
    ):
        args = {"q": q, "k": k, "v": v, "splits": 3} | kw
        with pytest.raises(InputError, match=match):
            gpu.decode(args.pop("q"), args.pop("k"), args.pop("v"), **args)


def changed(x, where, value, dtype=np.int32):
    """A copy of x as `dtype` with x[where] = value."""
    y = x.astype(dtype)
    y[where] = value
    return y


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "separate"])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda t, s: (changed(t, (1, 2), 1003), s), r"block_table: entry \[1, 2\] = 1003 points past the cache's 12 "),
        (lambda t, s: (changed(t, (1, 0), -1), s), r"block_table: entry \[1, 0\] = -1 points past"),
        (lambda t, s: (t, changed(s, 1, 0)), r"cache_seqlens: sequence 1 has 0 keys; choose 1 … 96"),
        (lambda t, s: (t, changed(s, 1, 97)), r"cache_seqlens: sequence 1 has 97 keys; choose 1 … 96"),
        (lambda t, s: (changed(t, (1, 1), 2**33 + 1, np.int64), s), r"block_table: entry \[1, 1\] = 2147483647 "),
    ],
)
def test_refused_on_the_gpu(change, match, splits, fused):
    """CuPy block_table / cache_seqlens: the kernel refuses a bad entry (NaN rows for that sequence, the others right)
    and check=True, decode_errors() or the next call once the GPU has run it raises it in one line. The case: 2
    sequences of 50 and 70 keys in pages of 16, 6 pages a row (96 keys), 12 pages in the cache."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(3)
    seqlens = np.array([50, 70], np.int32)
    q, k, v, table = random_case(rng, 2, 4, 2, 1, 64, "float16", seqlens=seqlens, page_size=16)  # 5 pages a row
    bad_table, bad_seqlens = change(table, seqlens)
    args = [cupy.asarray(x) for x in (q, k, v)]
    paged = {"block_table": cupy.asarray(bad_table), "cache_seqlens": cupy.asarray(bad_seqlens)}
    if fused:
        o, lse = gpu.decode(*args, splits=splits, return_lse=True, **paged)
    else:
        plan = decoding.prepare(*args, paged["block_table"], paged["cache_seqlens"], False, None, splits)
        o, lse = decoding.launch(cupy, plan, fused=False)
    with pytest.raises(InputError, match=match) as e:
        gpu.decode_errors()
    assert "\n" not in str(e.value)
    gpu.decode_errors()  # reported once
    o, lse = o.get().astype(np.float64), lse.get()
    assert np.isnan(o[1]).all() and np.isnan(lse[1]).all()
    o_ref, lse_ref = reference(q, k, v, causal=False, scale=1 / 8, table=table, seqlens=seqlens)
    o_std, _ = reference(q, k, v, causal=False, scale=1 / 8, table=table, seqlens=seqlens, dtype="float16")
    assert np.abs(o[0] - o_ref[0]).max() <= 2 * np.abs(o_std[0] - o_ref[0]).max() + 1e-3
    assert np.abs(lse[0] - lse_ref[0]).max() <= LSE_ATOL + LSE_RTOL * np.abs(lse_ref[0]).max()
    with pytest.raises(InputError, match=match):  # check=True: raised by the call itself
        gpu.decode(*args, splits=splits, check=True, **paged)
    gpu.decode(*args, splits=splits, **paged)
    cupy.cuda.Device().synchronize()
    with pytest.raises(InputError, match=match):  # else by the next call, before it launches
        gpu.decode(*args, block_table=cupy.asarray(table), cache_seqlens=cupy.asarray(seqlens))
    gpu.decode(*args, block_table=cupy.asarray(table), cache_seqlens=cupy.asarray(seqlens), check=True)


@pytest.mark.gpu
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.integers(1, 4),
    hkv=st.integers(1, 3),
    g=st.sampled_from([1, 2, 4, 8]),
    nq=st.integers(1, 8),
    page_size=st.sampled_from([1, 16, 64, 80, 256]),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_any_paged_shape(batch, hkv, g, nq, page_size, causal, seed):
    rng = np.random.default_rng(seed)
    seqlens = rng.integers(1, 700, batch).astype(np.int32)
    q, k, v, table = random_case(rng, batch, hkv * g, hkv, nq, 64, "float16", seqlens=seqlens, page_size=page_size)
    run_and_judge(q, k, v, table, seqlens, causal=causal, dtype="float16")


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda kw: kw | {"block_table": kw["block_table"] + 1000}, r"block_table: entry \[0, 0\]"),
        (lambda kw: kw | {"cache_seqlens": -kw["cache_seqlens"]}, "cache_seqlens: sequence 0 has"),
        (lambda kw: kw | {"block_table": kw["block_table"].astype(np.float32)}, "block_table: must be integers"),
        (lambda kw: kw | {"cache_seqlens": None}, "cache_seqlens: a paged cache needs both"),
        (lambda kw: kw | {"splits": 0}, "splits: expected an integer"),
        (lambda kw: kw | {"scale": float("nan")}, "scale: expected a positive finite"),
    ],
)
def test_hostile_paged_arguments_are_refused(change, match):
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(0)
    seqlens = np.array([100, 30], np.int32)
    q, k, v, table = random_case(rng, 2, 4, 2, 1, 64, "float16", seqlens=seqlens, page_size=16)
    kw = change({"block_table": table, "cache_seqlens": seqlens})
    with pytest.raises(InputError, match=match):
        gpu.decode(*(cupy.asarray(x) for x in (q, k, v)), **kw)


# -- without a GPU -----------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    table=st.lists(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=6), min_size=2, max_size=2),
    seqlens=st.lists(st.integers(-(2**40), 2**40), min_size=2, max_size=2),
)
def test_check_pages_refuses_every_table_that_would_read_past_the_cache(table, seqlens):
    width = min(len(row) for row in table)
    table = np.array([row[:width] for row in table], np.int64)
    seqlens = np.array(seqlens, np.int64)
    num_pages, page_size = 10, 16
    try:
        t, s = pages.check_pages(table, seqlens, 2, num_pages, page_size)
    except InputError as e:
        assert "\n" not in str(e) and str(e).split(":")[0] in ("block_table", "cache_seqlens")
        return
    for b in range(2):  # accepted: every page a sequence reads (the kernel's table[b, j // P]) is inside the cache
        assert 1 <= s[b] <= width * page_size
        assert all(0 <= t[b, j // page_size] < num_pages for j in range(int(s[b])))


@pytest.mark.parametrize(
    ("table", "seqlens", "match"),
    [
        (np.zeros((2, 3), np.int32), np.array([1, 49]), "cache_seqlens: sequence 1 has 49 keys; choose 1 … 48"),
        (np.zeros((2, 3), np.int32), np.array([0, 5]), "cache_seqlens: sequence 0 has 0 keys"),
        (np.array([[0, 1, 2], [3, 10, 0]]), np.array([5, 17]), r"block_table: entry \[1, 1\] = 10 points past"),
        (np.array([[0, -1, 2], [3, 4, 0]]), np.array([17, 5]), r"block_table: entry \[0, 1\] = -1"),
        (np.zeros((3, 3), np.int32), np.array([1, 1]), r"block_table: must be integers shaped \(2, pages"),
        (np.zeros((2, 3), np.float64), np.array([1, 1]), "block_table: must be integers"),
        (np.zeros((2, 3), np.int32), np.array([1.0, 1.0]), "cache_seqlens: must be 2 integers"),
        (None, np.array([1, 1]), "block_table: a paged cache needs both"),
    ],
)
def test_check_pages_messages(table, seqlens, match):
    with pytest.raises(InputError, match=match):
        pages.check_pages(table, seqlens, 2, 10, 16)


@pytest.mark.parametrize(
    ("table", "seqlens", "match"),
    [
        (np.zeros((3, 3), np.int32), np.array([1, 1]), r"block_table: must be integers shaped \(2, pages"),
        (np.zeros((2, 0), np.int32), np.array([1, 1]), r"block_table: must be integers shaped \(2, pages"),
        (np.zeros(2, np.int32), np.array([1, 1]), r"block_table: must be integers shaped \(2, pages"),
        (np.zeros((2, 3), np.float32), np.array([1, 1]), "block_table: must be integers"),
        (np.zeros((2, 3), np.int32), np.array([1.0, 1.0]), "cache_seqlens: must be 2 integers"),
        (np.zeros((2, 3), np.int32), np.array([[1, 1]]), r"cache_seqlens: must be 2 integers .* \(1, 2\)"),
    ],
)
def test_page_shapes_checked_without_reading_values(table, seqlens, match):
    """CuPy block_table / cache_seqlens: what the host checks (their values are the kernel's to check); NumPy arrays
    stand in, as the check reads only ndim, shape and dtype."""
    with pytest.raises(InputError, match=match):
        pages.check_page_shapes(table, seqlens, 2)
    pages.check_page_shapes(np.zeros((2, 3), np.int64), np.array([1, 1], np.uint8), 2)


def test_check_pages_ignores_entries_past_a_sequence():
    table = np.array([[4, -1, 99], [2, 3, 1]])
    t, s = pages.check_pages(table, np.array([16, 48]), 2, 5, 16)  # sequence 0 reads page 4 only
    assert t.dtype == np.int32 and s.tolist() == [16, 48] and t[1].tolist() == [2, 3, 1]


def test_rows_past_64_are_refused_and_row_tiles_grow():
    assert [geometry.decoding_tiles(128, r).m_tiles for r in (1, 16, 17, 32, 33, 64)] == [1, 1, 2, 2, 4, 4]
    with pytest.raises(InputError, match="q: g·Nq = 72 query rows"):
        geometry.decoding_tiles(128, 72)


def test_shared_memory_holds_the_stages_and_the_merge():
    # d = 128, 16 rows, Bc = 64, 3 stages: Q (16 × 128) and 3 × (K_j, V_j) of 64 × 128 halves; the merge is smaller
    assert registry.DECODE[8].smem(128, geometry.decoding_tiles(128, 8)) == 2 * (16 * 128 + 3 * 2 * 64 * 128)
    for d in (64, 128):
        for rows in (16, 32, 64):
            t = geometry.decoding_tiles(d, rows)
            merge = 4 * (4 * 16 * (d + 8 + 2) + t.block_rows)  # O rows padded by 8 floats, m and ℓ
            assert registry.DECODE[8].smem(d, t) >= 2 * t.block_rows * d + merge
            assert registry.DECODE[8].smem(d, t) <= 163 * 1024  # an A100's opt-in shared memory


def test_shared_memory_where_the_merge_outgrows_the_stages():
    # A tiling whose merge buffers are larger than its stages (the defaults' never are): d = 128, 32 rows (M_TILES 2,
    # 2 key warps of KW = 16 keys), Bc = 32, 2 stages. From 08_flash_decoding.cu's indexing after the loop, in floats
    # from sKV: sO (NWARPS, 16, SO_ROW = HEAD_DIM + 8) = 4 · 16 · 136 = 8704, sm and sl 64 each, sL MAX_ROWS = 32:
    # 8864 floats, 35,456 bytes, past the stages' 2 · 2 · 32 · 128 · 2 = 32,768. With Q (32 × 128 halves, 8192 bytes)
    # before sKV: 43,648 bytes.
    t = dataclasses.replace(geometry.decoding_tiles(128, 32), block_cols=32, stages=2)
    assert (t.block_rows, t.warps, t.m_tiles) == (32, 4, 2)
    assert registry.DECODE[8].smem(128, t) == 8192 + 4 * (4 * 16 * 136 + 64 + 64 + 32) == 43_648


@pytest.mark.parametrize(
    ("B", "Hq", "Hkv", "Nq", "seqlens"), [(1, 8, 1, 1, None), (2, 4, 2, 3, None), (2, 8, 1, 2, (300, 1200))]
)
def test_splits_are_sim_decodes(B, Hq, Hkv, Nq, seqlens):
    """The default number of splits is the one sim.decode picks for the same problem on the same preset."""
    hw = hardware.get("H100-SXM")
    d, rng = 64, np.random.default_rng(1)
    q = rng.standard_normal((B, Hq, Nq, d)).astype(np.float16)
    if seqlens is None:
        k = rng.standard_normal((B, Hkv, 5000, d)).astype(np.float16)
        expected = sim.decode(q, k, k, hardware=hw).splits
        nk = 5000
    else:
        k = rng.standard_normal((40, 64, Hkv, d)).astype(np.float16)
        table = np.arange(40).reshape(2, 20)
        expected = sim.decode(q, k, k, block_table=table, cache_seqlens=np.array(seqlens), hardware=hw).splits
        nk = max(seqlens)
    assert decoding._best_splits(B * Hkv, Hq // Hkv * Nq, nk, d, 2, hw.name, 0 if seqlens is None else 64) == expected


def test_reference_is_softmax_of_the_definition():
    """The test's reference on a case worked by hand: one query, two keys, scores 0 and ln 3: weights 1/4, 3/4."""
    q = np.array([[[[1.0, 0.0]]]])
    k = np.array([[[[0.0, 0.0], [math.log(3), 0.0]]]])
    v = np.array([[[[1.0, 0.0], [0.0, 2.0]]]])
    o, lse = reference(q, k, v, causal=False, scale=1.0)
    assert np.allclose(o[0, 0, 0], [0.25, 1.5]) and np.isclose(lse[0, 0, 0], math.log(4))
    o, lse = reference(np.concatenate([q, q], axis=2), k[:, :, :1], v[:, :, :1], causal=True, scale=1.0)
    assert np.isneginf(lse[0, 0, 0]) and (o[0, 0, 0] == 0).all() and np.allclose(o[0, 0, 1], [1.0, 0.0])


@pytest.mark.gpu
def test_read_ceiling_reads_every_piece_it_should():
    """bench_decode's floor reads K and V whole: thread 0 folds (XORs) the 16-byte pieces 0, s, 2s, … < 2n of K's n
    pieces then V's (s = the grid's threads; the unrolled loop and the tail: 2n is no multiple of UNROLL · s) and stores the
    fold only if it is 0x9E3779B9. K's first word set so that the host's XOR of exactly those pieces is that value:
    the word is stored; one bit off: nothing is."""
    cupy = pytest.importorskip("cupy")
    from gpu.lab import bench_decode

    sms = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]
    stride = geometry.READ_BLOCKS_PER_SM * sms * geometry.READ_THREADS
    n = 5 * stride + 12345  # thread 0: 8 pieces in the unrolled loop, 3 in the tail
    rng = np.random.default_rng(3)
    k, v = (rng.integers(0, 2**32, (n, 4), dtype=np.uint32) for _ in range(2))
    magic = np.uint32(0x9E3779B9)
    k[0, 0] ^= np.bitwise_xor.reduce(np.concatenate([k, v])[0 : 2 * n : stride].ravel()) ^ magic
    for flip, stored in ((0, int(magic)), (1, 0)):
        k[0, 0] ^= np.uint32(flip)
        cache = {"k": cupy.asarray(k).view(cupy.float16), "v": cupy.asarray(v).view(cupy.float16)}
        out = cupy.zeros(1, cupy.uint32)
        bench_decode.read_call(cupy, [cache], out)()
        assert int(out[0]) == stored
