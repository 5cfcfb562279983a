"""The backward's work arrays and its `deterministic` argument, without a GPU: what each rung allocates (O(N), the
deterministic counters zeroed), and a one-line InputError for every value or kernel that cannot honour it."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu import backward, registry
from gpu.inputs import Problem
from gpu.tiling import backward_warpgroup_tiles
from gpu.variants import Variant
from sim.core.errors import InputError


def _problem(n=1000, d=64):
    return Problem(batch=2, heads=3, n=n, nk=700, d=d, dtype="float16", causal=True, scale=0.125)


def test_rung_5_needs_d_and_the_float32_accumulator_only():
    p = _problem()
    assert backward.workspace(registry.backward(5), p, 64, None) == [
        ((2, 3, 1000), "float32", False),
        ((2, 3, 1000, 64), "float32", False),
    ]


@pytest.mark.parametrize(("d", "br"), [(64, 128), (128, 64)])
def test_rung_7_adds_l_and_d_blocks_of_its_br_and_zeroed_counters_when_deterministic(d, br):
    p, spec = _problem(d=d), registry.backward(7)
    tiles = spec.tiles(d)
    assert tiles.block_rows == br
    blocks = -(-1000 // br)  # the last Q block ragged: its rows past N are zeros in the blocks
    common = [((2, 3, 1000), "float32", False), ((2, 3, 1000, d), "float32", False)]
    ld = ((2, 3, blocks, 2, br), "float32", False)
    done = ((2, 3), "int32", False)  # thread blocks done with each query plane, zeroed by the pre-pass
    assert backward.workspace(spec, p, d, tiles) == [*common, ld, done]
    deterministic = [*common, ld, done, ((2, 3, blocks), "int32", True)]
    assert backward.workspace(spec, p, d, tiles, deterministic=True) == deterministic


def test_deterministic_is_refused_by_the_kernels_that_add_in_any_order():
    for rung in (4, 5):
        spec = registry.backward(rung)
        with pytest.raises(InputError, match=f"deterministic: only rung 7 .* rung {rung} adds them with atomics"):
            backward.check_deterministic(spec, spec.tiles(64), True)
        backward.check_deterministic(spec, spec.tiles(64), False)  # the default: no error
    seven = registry.backward(7)
    with pytest.raises(InputError, match="deterministic: needs rung 7's TMA reduce-adds, not tiles with dq_atomics"):
        backward.check_deterministic(seven, backward_warpgroup_tiles(stages=2, dq_atomics=True), True)
    backward.check_deterministic(seven, seven.tiles(128), True)


@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=8), st.none(), st.lists(st.booleans())))
def test_deterministic_takes_only_a_bool(value):
    seven = registry.backward(7)
    with pytest.raises(InputError, match=r"^deterministic: expected True or False, got "):
        backward.check_deterministic(seven, seven.tiles(64), value)


def test_rung_7_rounds_dq_itself_from_fused_planes_on_plain_with_tma_reduce_adds():
    seven, five = registry.backward(7), registry.backward(5)
    tiles = seven.tiles(64)
    many = backward.FUSED_PLANES
    assert backward.fused(seven, tiles, many) and backward.fused(seven, tiles, 10 * many)
    assert not backward.fused(seven, tiles, many - 1)  # fewer planes: the third launch rounds dQ
    assert not backward.fused(seven, backward_warpgroup_tiles(stages=2, dq_atomics=True), many)
    assert not backward.fused(seven, dataclasses.replace(tiles, dq_pass=True), many)
    assert not backward.fused(seven, tiles, many, Variant(group=2))  # a variant: the pass
    assert not backward.fused(five, five.tiles(64), many)


@pytest.mark.parametrize(("d", "br"), [(64, 128), (128, 64)])
def test_rung_7_lays_a_packed_batch_out_sequence_by_sequence_in_blocks_of_the_longest(d, br):
    # three sequences, the longest 1000 rows (Problem's n), 4 query heads: D and the accumulator in o's packed order
    # (total_q, Hq), the L/D blocks (B, Hq, Tr of the longest, 2, Br), one plane's counters (B, Hq)
    p = Problem(batch=3, heads=4, n=1000, nk=900, d=d, dtype="float16", causal=False, scale=0.125)
    rows = (1000 + 130 + 7, 4)
    spec = registry.backward(7)
    tiles = spec.tiles(d)
    blocks = -(-1000 // br)
    packed = [(rows, "float32", False), ((*rows, d), "float32", False), ((3, 4, blocks, 2, br), "float32", False),
              ((3, 4), "int32", False)]  # fmt: skip
    assert backward.workspace(spec, p, d, tiles, rows=rows) == packed
    assert backward.workspace(spec, p, d, tiles, True, rows) == [*packed, ((3, 4, blocks), "int32", True)]
    variant = Variant(cu_seqlens_q=object(), cu_seqlens_k=object())
    backward.check_deterministic(spec, tiles, True, variant)  # in order within each sequence, as a plain call
    assert not backward.fused(spec, tiles, 10 * backward.FUSED_PLANES, variant)  # the third launch rounds dQ
    assert registry.backward(None, d, "9.0", variant.kinds).rung == 7  # the default for a packed call on sm_90
    assert registry.backward(None, d, "9.0", (*variant.kinds, "softcap", "alibi")).rung == 7  # every variant: run 47
    assert registry.backward(None, d, "8.0", variant.kinds).rung == 5  # no rung 7 before Hopper
