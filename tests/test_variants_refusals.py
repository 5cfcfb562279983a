"""Bad variant arguments are refused in one line naming the argument, never a traceback or a wrong answer."""

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.core.errors import InputError


def qkv(Hq=4, Hkv=2, N=8, Nk=8, d=4):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((1, Hq, N, d)).astype(np.float16),
        rng.standard_normal((1, Hkv, Nk, d)).astype(np.float16),
        rng.standard_normal((1, Hkv, Nk, d)).astype(np.float16),
    )


def refused(name, call):
    with pytest.raises(InputError) as e:
        call()
    message = str(e.value)
    assert message.startswith(f"{name}:"), message
    assert "\n" not in message
    return message


def test_query_heads_not_a_multiple_of_kv_heads():
    q, k, v = qkv(Hq=6, Hkv=4)
    assert "6 query heads" in refused("k", lambda: sim.run("flash2", q, k, v))
    refused("kv_heads", lambda: sim.count("flash2", n=8, d=4, heads=6, kv_heads=4))


@pytest.mark.parametrize("algorithm", ["standard", "flash1"])
@pytest.mark.parametrize(
    "name,value", [("window", (2, 0)), ("alibi_slopes", [0.1] * 4), ("softcap", 5.0), ("pack_gqa", True)]
)
def test_which_algorithm_takes_which_variant(algorithm, name, value):
    q, k, v = qkv()
    message = refused(name, lambda: sim.run(algorithm, q, k, v, **{name: value}))
    assert algorithm in message and "flash2" in message


@given(left=st.integers(-100, -2), right=st.integers(-1, 5))
def test_window_sides_below_minus_one(left, right):
    q, k, v = qkv()
    refused("window", lambda: sim.run("flash2", q, k, v, window=(left, right)))
    refused("window", lambda: sim.run("flash2", q, k, v, window=(right, left)))


@pytest.mark.parametrize("window", [3, (1,), (1, 2, 3), ("a", 1), (1.5, 0), "ab"])
def test_window_not_a_pair_of_integers(window):
    q, k, v = qkv()
    refused("window", lambda: sim.run("flash2", q, k, v, window=window))


@given(c=st.one_of(st.floats(max_value=0.0), st.just(float("nan")), st.just(float("inf"))))
def test_softcap_not_positive_and_finite(c):
    q, k, v = qkv()
    refused("softcap", lambda: sim.run("flash2", q, k, v, softcap=c))


@pytest.mark.parametrize("slopes", [[0.1, 0.2], np.ones((2, 4)), np.ones((1, 3)), [[0.1]], [np.nan] * 4, "x"])
def test_alibi_slopes_shape_and_values(slopes):
    q, k, v = qkv()
    refused("alibi_slopes", lambda: sim.run("flash2", q, k, v, alibi_slopes=slopes))


def test_dropout_with_the_packed_schedule():
    q, k, v = qkv()
    refused("pack_gqa", lambda: sim.run("flash2", q, k, v, pack_gqa=True, dropout_p=0.1, seed=0))


def test_a_result_carries_its_variant():
    q, k, v = qkv()
    r = sim.run("flash2", q, k, v, window=(2, 0))
    refused("window", lambda: sim.backward(r, np.ones_like(q), window=(1, 0)))


def packed(lens_q=(3, 5), lens_k=(4, 4)):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((sum(lens_q), 2, 4)).astype(np.float16)
    k = rng.standard_normal((sum(lens_k), 1, 4)).astype(np.float16)
    return q, k, k.copy()


@settings(max_examples=60, deadline=None)
@given(cu=st.lists(st.integers(-3, 12), min_size=1, max_size=5))
def test_cu_seqlens_refused_unless_from_zero_increasing_to_the_total(cu):
    q, k, v = packed()
    good = len(cu) >= 2 and cu[0] == 0 and all(b > a for a, b in pairwise(cu)) and cu[-1] == 8
    if good:
        return
    refused("cu_seqlens_q", lambda: sim.run_varlen("flash2", q, k, v, cu, [0, 4, 8][: len(cu)] or [0, 8]))


@pytest.mark.parametrize(
    "cu,what", [([0, 3, 3, 8], "not increasing"), ([1, 3, 8], "start at 0"), ([0, 3, 9], "past"), ([0, 3, 7], "short")]
)
def test_cu_seqlens_messages(cu, what):
    q, k, v = packed()
    assert what in refused(
        "cu_seqlens_k", lambda: sim.run_varlen("flash2", q, k, v, {3: [0, 3, 8], 4: [0, 3, 5, 8]}[len(cu)], cu)
    )


def test_cu_seqlens_counts_disagree():
    q, k, v = packed()
    refused("cu_seqlens_k", lambda: sim.run_varlen("flash2", q, k, v, [0, 3, 8], [0, 2, 5, 8]))


def test_packed_tensors_are_three_dimensional():
    q, k, v = packed()
    refused("q", lambda: sim.run_varlen("flash2", q[:, 0], k, v, [0, 3, 8], [0, 4, 8]))


def cache(num_pages=4, page_size=4):
    rng = np.random.default_rng(0)
    c = rng.standard_normal((num_pages, page_size, 1, 4)).astype(np.float16)
    return rng.standard_normal((2, 2, 1, 4)).astype(np.float16), c, c.copy()


@given(entry=st.one_of(st.integers(4, 1000), st.integers(-1000, -1)), where=st.integers(0, 1))
def test_block_table_pointing_past_the_cache(entry, where):
    q, kc, vc = cache()
    table = np.array([[0, 1], [2, 3]])
    table[1, where] = entry
    message = refused("block_table", lambda: sim.decode(q, kc, vc, block_table=table, cache_seqlens=[8, 8]))
    assert f"[1, {where}]" in message


def test_unused_block_table_entries_are_not_read():
    q, kc, vc = cache()
    r = sim.decode(q, kc, vc, block_table=np.array([[0, -1], [2, 99]]), cache_seqlens=[3, 4])
    assert r.ledger.per_tensor()["block_table"]["read"] == 4 * 2


@pytest.mark.parametrize(
    "table,seqlens,name",
    [
        (np.array([[0, 1], [2, 3]]), [8, 9], "cache_seqlens"),
        (np.array([[0, 1], [2, 3]]), [0, 3], "cache_seqlens"),
        (np.array([[0, 1], [2, 3]]), [3], "cache_seqlens"),
        (np.array([[0.0, 1], [2, 3]]), [3, 3], "block_table"),
        (np.array([0, 1]), [3, 3], "block_table"),
        (np.array([[0, 1], [2, 3]]), None, "cache_seqlens"),
    ],
)
def test_paged_arguments(table, seqlens, name):
    q, kc, vc = cache()
    refused(name, lambda: sim.decode(q, kc, vc, block_table=table, cache_seqlens=seqlens))


def test_a_page_too_big_for_the_sram():
    q, kc, vc = cache(num_pages=1, page_size=4096)
    refused("page_size", lambda: sim.decode(q, kc, vc, block_table=[[0], [0]], cache_seqlens=[5, 5], hardware="toy"))


def test_packed_alibi_slopes_one_row_per_sequence():
    q, k, v = packed()
    refused(
        "alibi_slopes", lambda: sim.run_varlen("flash2", q, k, v, [0, 3, 8], [0, 4, 8], alibi_slopes=np.ones((3, 2)))
    )


def test_paged_tiles_are_pages():
    q, kc, vc = cache()
    refused(
        "block_cols", lambda: sim.decode(q, kc, vc, block_table=[[0, 1], [2, 3]], cache_seqlens=[8, 8], block_cols=2)
    )


@pytest.mark.parametrize("record", ["counts", "values"])
def test_pack_gqa_needs_heads_to_pack(record):
    q, k, v = (x[0, 0] for x in qkv())  # (N, d): one head, nothing to pack (found by the CLI's property test)
    assert "one head" in refused("pack_gqa", lambda: sim.run("flash2", q, k, v, pack_gqa=True, record=record))
