"""The kernel registry (no GPU needed): every tiling it uses or tunes fits in shared memory, and bad tilings are refused."""

import dataclasses
import warnings

import pytest

from gpu import registry
from gpu.lab.harness import TUNE
from gpu.tiling import backward_tiles
from sim.core.errors import InputError

H100_SMEM, A100_SMEM = 227 * 1024, 163 * 1024  # dynamic shared memory one thread block may opt into


@pytest.mark.parametrize(
    "spec", [s for s in registry.ALL_SPECS if s.default_tiles], ids=lambda s: f"{s.direction}-{s.name}"
)
def test_default_tilings_fit_on_ampere_and_hopper(spec):
    limit = H100_SMEM if spec.arch == "sm_90a" else A100_SMEM  # rung 6 runs on Hopper only
    for d in spec.head_dims or range(1, 129):
        assert spec.smem(d, None) <= limit, d


def test_tuned_tilings_fit_on_hopper():
    for (direction, d), variants in TUNE.items():
        for name, tiles in variants:
            spec = registry.forward(name) if direction == "forward" else registry.backward(name)
            assert spec.smem(d, tiles) <= H100_SMEM
            if tiles is not None:
                assert spec.smem(d, tiles) * tiles.min_blocks <= 228 * 1024  # the SM's shared memory holds min_blocks


def test_backward_smem_counts_every_buffer():
    # d = 128 (rows of 136 elements), Bc = 128, Br = 64: K, V, two stages of Q and dO, dSᵀ (128 × 72), L and D
    assert registry.backward(5).smem(128, None) == 2 * (2 * 128 * 136 + 4 * 64 * 136 + 128 * 72) + 4 * 4 * 64


def test_bad_backward_tilings_are_refused():
    with pytest.raises(InputError, match="Br must be a multiple of 16"):
        backward_tiles(warps=8, block_rows=40)
    with pytest.raises(InputError, match="Br must be a multiple of 16"):
        backward_tiles(warps=6, block_rows=64)


def test_kernel_names_and_rungs():
    assert registry.forward(None).rung == registry.DEFAULT_FORWARD == 3 and registry.backward(None).rung == 5
    assert [registry.rung(n).name for n in (1, 2, 3, 4, 5, 6, 7)] == [f"rung {n}" for n in (1, 2, 3, 4, 5, 6, 7)]
    directions = [registry.rung(n).direction for n in (1, 2, 3, 4, 5, 6, 7)]
    assert directions == ["forward"] * 3 + ["backward"] * 2 + ["forward", "backward"]
    with pytest.raises(InputError, match="kernel: expected a rung number among 1, 2, 3, 4, 5, 6, 7, got 9"):
        registry.rung(9)
    with pytest.raises(InputError, match="kernel: the forward rungs are 1, 2, 3, 6, got 'v9'"):
        registry.forward("v9")


@pytest.mark.parametrize(
    ("d", "cc", "expected"),
    [
        (64, "9.0", 6),
        (128, "9.0", 6),
        (40, "9.0", 3),
        (96, "9.0", 3),
        (64, "8.0", 3),
        (128, "8.9", 3),
        (128, "10.0", 3),
    ],
)
def test_default_forward_is_rung_6_where_it_runs(d, cc, expected):
    assert registry.forward(None, d, cc).rung == expected


def test_rung_6_says_why_it_does_not_run():
    six = registry.forward(6)
    assert six.fits(128, "9.0") is None
    assert six.fits(40, "9.0") == "rung 6 takes head dims 64 and 128, got d=40"
    assert six.fits(64, "8.0") == "rung 6 runs on compute capability 9.0 only (sm_90a), this GPU is 8.0"
    assert registry.forward(3).fits(40, "8.0") is None


@pytest.mark.parametrize(("direction", "old", "rung"), [("forward", "v1", 1), ("forward", "v2", 2),
                         ("forward", "v3", 3), ("forward", "v4", 6), ("backward", "v1", 4), ("backward", "v2", 5)])  # fmt: skip
def test_the_old_names_are_their_rungs_with_a_warning(direction, old, rung):
    pick = registry.forward if direction == "forward" else registry.backward
    with pytest.warns(FutureWarning, match=f"kernel '{old}' is the old name of rung {rung}: write {rung}"):
        assert pick(old).rung == rung
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a recording's old name: read without a warning
        assert registry.recorded(direction, old).rung == rung
    assert pick(str(rung)) is pick(rung)


@pytest.mark.parametrize(
    ("d", "cc", "expected"),
    [(64, "9.0", 7), (128, "9.0", 7), (96, "9.0", 5), (64, "8.0", 5), (128, "10.0", 5), (128, None, 5)],
)
def test_default_backward_is_rung_7_where_it_runs_faster(d, cc, expected):
    assert registry.backward(None, d, cc).rung == expected


def test_backward_by_rung_number():
    assert registry.backward(7).name == "rung 7" and registry.backward(5).name == "rung 5"
    with pytest.raises(InputError, match="kernel: the backward rungs are 4, 5, 7, got 6"):
        registry.backward(6)


def test_rung_7_smem_counts_every_buffer():
    # Bc = 128, Br = 64, two stages: K, V; Q and dO per stage; two dS buffers (64 × 64) per consumer warpgroup; its
    # float32 dQ product (64 × d/2, split); L and D per stage; 5 mbarriers
    halves = 2 * (2 * 128 * 128 + 4 * 64 * 128 + 4 * 64 * 64)
    assert registry.backward(7).smem(128, None) == 1024 + halves + 4 * (2 * 64 * 64 + 4 * 64) + 8 * 5
    # d = 64 by default: Br = 128, each warpgroup's dQ product 64 rows × all 64 columns
    halves = 2 * (2 * 128 * 64 + 4 * 128 * 64 + 4 * 128 * 64)
    assert registry.backward(7).smem(64, None) == 1024 + halves + 4 * (2 * 64 * 64 + 4 * 128) + 8 * 5


def test_rung_7_splits_dq_and_reduces_it_through_tma_by_default():
    from gpu.tiling import backward_warpgroup_tiles

    rung7 = registry.backward(7)
    for d in (64, 128):
        assert rung7.defines(d, "float16")["SPLIT_DQ"] == 1 and rung7.defines(d, "float16")["DQ_TMA"] == 1
    atomics = backward_warpgroup_tiles(stages=2, dq_atomics=True)
    assert rung7.defines(64, "bfloat16", atomics) == {
        "HEAD_DIM": 64, "BR": 64, "STAGES": 2, "SPLIT_DQ": 0, "DQ_TMA": 0, "STORAGE": 2,
    }  # fmt: skip
    # three stages still fit the 227 KiB one thread block may opt into, at d = 128 and with either dQ layout
    for split in (False, True):
        assert rung7.smem(128, backward_warpgroup_tiles(stages=3, split_dq=split)) <= 227 * 1024
    wide = backward_warpgroup_tiles(
        stages=2, split_dq=True, block_rows=128
    )  # Br = 128: each warpgroup 64 of dQ_i's rows
    assert rung7.defines(64, "float16", wide)["BR"] == 128
    assert (
        rung7.smem(64, wide)
        == 1024 + 2 * (2 * 128 * 64 + 4 * 128 * 64 + 4 * 128 * 64) + 4 * (2 * 64 * 64 + 4 * 128) + 40
    )
    with pytest.raises(InputError, match="tiles: rung 7 takes Br = 64, or 128 at d = 64 with split_dq, got d=128"):
        rung7.defines(128, "float16", backward_warpgroup_tiles(stages=2, split_dq=True, block_rows=128))
    with pytest.raises(InputError, match=r"got d=64, 128x128 wg2x64\+1 st2$"):
        rung7.defines(64, "float16", backward_warpgroup_tiles(stages=2, block_rows=128))


def test_rung_6_smem_counts_every_buffer():
    # d = 128, Br = Bc = 128, 3 stages: alignment, Q_i, K_j and V_j per stage, q_full, q_empty and 3 barriers a stage,
    # and (the default tiling's persistent walk takes its units from tickets: geometry.tickets) the ring of two tiles'
    # (i, plane), 8 bytes each; with turns (N ≤ 2048) the walk is static, without the ring
    spec = registry.forward(6)
    assert spec.smem(128, None) == 1024 + 2 * 128 * (128 + 2 * 3 * 128) + 8 * (2 + 3 * 3) + 16
    assert spec.smem(128, spec.tiles_for(128, 1024, False)) == 1024 + 2 * 128 * (128 + 2 * 3 * 128) + 8 * (2 + 3 * 3)


@pytest.mark.parametrize(("d", "n", "causal", "rows", "pingpong"), [
    (64, 1024, True, 128, True), (64, 2048, True, 128, True), (64, 4096, True, 192, True), (64, 1024, False, 192, True),
    (128, 1024, False, 128, True), (128, 2048, True, 128, True), (128, 4096, False, 128, False),
])  # fmt: skip
def test_rung_6_tiles_by_shape_persistent(d, n, causal, rows, pingpong):
    # run 35: Br = 128 with turns where the rows are short (d = 64 causal, d = 128), one thread block per SM always
    tiles = registry.forward(6).tiles_for(d, n, causal)
    assert (tiles.block_rows, tiles.pingpong, tiles.persistent) == (rows, pingpong, True)
    given = registry.forward(6).tiles(d)
    assert registry.forward(6).tiles_for(d, n, causal, given) is given  # a tiling asked for is the one used
    assert registry.forward(3).tiles_for(d, n, causal) == registry.forward(3).tiles(d)  # no shape rule: the default


def test_the_backward_prepass_takes_one_lane_per_16_byte_piece_of_a_row_up_to_a_warp():
    from gpu.geometry import passes_defines

    # (row length, dtype) → ROW_LANES: 16-byte pieces of a row, rounded down to a power of two, at most 32
    for (row, dtype), lanes in {
        (64, "float16"): 8, (128, "bfloat16"): 16, (72, "float16"): 8, (8, "float16"): 1,
        (64, "float32"): 16, (128, "float32"): 32, (256, "float32"): 32,
    }.items():  # fmt: skip
        assert passes_defines(row, dtype) == {
            "HEAD_DIM": row, "STORAGE": {"float32": 0, "float16": 1, "bfloat16": 2}[dtype], "WIDE": 1, "ROW_LANES": lanes
        }  # fmt: skip
    assert passes_defines(50, "float16")["WIDE"] == 0 and passes_defines(50, "float16")["ROW_LANES"] == 32


@pytest.mark.parametrize(("d", "n", "causal", "o_buf"), [
    (64, 1024, True, 1), (64, 2048, True, 1), (64, 4096, True, 1), (64, 1024, False, 1),
    (128, 1024, False, 0), (128, 2048, True, 0), (128, 16384, False, 0),
])  # fmt: skip
def test_rung_6_stores_o_by_tma_where_the_walk_is_persistent(d, n, causal, o_buf):
    # run 37-fwd3: O_i leaves through the tile's last K_j buffer (Bc rows, so Br ≤ Bc); run 39-fwd4: through a buffer
    # of its own where one fits in shared memory (d = 64, Br = 128 and 192); persistent walk only
    spec = registry.forward(6)
    tiles = spec.tiles_for(d, n, causal)
    defines = spec.defines(d, "float16", tiles)
    assert (defines["O_TMA"], defines["O_BUF"]) == (1, o_buf)
    ring = 16 if defines["TICKETS"] else 0  # the ticketed walk's two slots of (i, plane): d = 128, N > 2048
    assert spec.smem(d, tiles) == 1024 + 2 * d * ((1 + o_buf) * tiles.block_rows + 6 * 128) + 8 * 11 + ring <= H100_SMEM
    assert defines["TICKETS"] == (d == 128 and n > 2048)
    one_per_tile = dataclasses.replace(tiles, persistent=False)  # what the launcher runs for softcap and ALiBi
    assert spec.defines(d, "float16", one_per_tile)["O_TMA"] == spec.defines(d, "float16", one_per_tile)["O_BUF"] == 0
