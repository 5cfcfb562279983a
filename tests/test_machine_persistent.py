"""Rung 6's persistent launch in the machine model (`sim.machine.grids.persistent_walk`, `causal_walk`, `chained`,
the refill in `sim.machine.timing`, O_i's own buffer): the order of the tiles each SM walks, the L2 outcome of that
order and the time of a chained block, each worked by hand here from 06_flash2_wgmma_tma.cu's `for_each_tile`
(units b, b + grid, … for block b; causal, a unit is the pair of Q blocks (Tr − 1 − q, q) of one plane, the longer
first, and with more units than blocks the host's list `causal_walk`, as gpu/flash.py launches it)."""

import numpy as np
import pytest

from gpu import registry
from gpu.lab.predict import launch_of
from sim.machine import grids, hardware, l2, timing
from sim.machine.launch import Launch, blocks_per_sm

H100 = hardware.get("H100-SXM")
SMS = H100.sm_count


def test_causal_walk_keeps_the_pairs_but_for_the_last_rounds_which_it_deals_tile_by_tile():
    # N = Nk = 64, Br = Bc = 16: Tr = 4, units (3, 0) and (2, 1) per plane; 5 planes: 10 units on 4 blocks, 2.5
    # rounds. Work per tile i (K/V blocks i + 1, plus 1): 2, 3, 4, 5; a unit 7.
    # Kept: every whole round but the last, 1 round: units 0 … 3 to blocks 0 … 3, loads 7, 7, 7, 7.
    # Dealt, heaviest first, ties in plane order, each to the least-loaded block (the first of equals):
    #   (2,3) b0 12; (3,3) b1 12; (4,3) b2 12; (2,2) b3 11; (3,2) b3 15; (4,2) b0 16; (2,1) b1 15; (3,1) b2 15;
    #   (4,1) b1 18; (2,0) b2 17; (3,0) b3 17; (4,0) b0 18  →  loads 18, 18, 17, 17 (mean 17.5)
    # The plain walk (units u to block u mod 4) to the end: blocks 0, 1 take 3 units (21), blocks 2, 3 two (14).
    walk = grids.causal_walk(5, 64, 64, 16, 16, 4)
    assert walk.dtype == np.int32
    assert walk.tolist() == [
        [0, 3, 0, 0], [0, 2, 1, 0], [1, 3, 0, 0], [1, 2, 1, 0],  # the kept round: pairs
        [2, 3, -1, 0], [3, 3, -1, 0], [4, 3, -1, 0], [2, 2, -1, 0],  # each block's first dealt tile
        [4, 2, -1, 0], [2, 1, -1, 0], [3, 1, -1, 0], [3, 2, -1, 0],
        [4, 0, -1, 0], [4, 1, -1, 0], [2, 0, -1, 0], [3, 0, -1, 0],
    ]  # fmt: skip
    assert grids.persistent_walk(64, 64, 16, 16, 5, True, 4) == [
        [(0, 3), (0, 0), (2, 3), (4, 2), (4, 0)],
        [(0, 2), (0, 1), (3, 3), (2, 1), (4, 1)],
        [(1, 3), (1, 0), (4, 3), (3, 1), (2, 0)],
        [(1, 2), (1, 1), (2, 2), (3, 2), (3, 0)],
    ]
    k = grids.flash2_forward(64, 64, 16, 2, 16, 16, True, 5, sms=4)
    assert [b.tiles + len(b.parts) for b in k.blocks] == [18, 18, 17, 17]  # K/V blocks + tiles: the loads above


def test_a_dealt_round_leaves_blocks_idle_where_the_tiles_run_out():
    # Tr = 4, 3 planes: 6 units on 4 blocks, 1.5 rounds: no whole round kept, all 12 tiles dealt.
    #   (0,3) b0 5; (1,3) b1 5; (2,3) b2 5; (0,2) b3 4; (1,2) b3 8; (2,2) b0 9; (0,1) b1 8; (1,1) b2 8;
    #   (2,1) b1 11; (0,0) b2 10; (1,0) b3 10; (2,0) b0 11  →  11, 11, 10, 10 (the plain walk's 14, 14, 7, 7)
    assert grids.persistent_walk(64, 64, 16, 16, 3, True, 4) == [
        [(0, 3), (2, 2), (2, 0)],
        [(1, 3), (0, 1), (2, 1)],
        [(2, 3), (1, 1), (0, 0)],
        [(0, 2), (1, 2), (1, 0)],
    ]


@pytest.mark.parametrize(("planes", "n", "nk", "br"), [
    (512, 1024, 1024, 128), (256, 2048, 2048, 128), (128, 4096, 4096, 192), (140, 700, 1000, 128),
    (140, 1000, 700, 128), (3, 1000, 1000, 128), (80, 1024, 1024, 128),
])  # fmt: skip
def test_causal_walk_covers_each_tile_once_and_evens_the_blocks(planes, n, nk, br):
    """causal_walk (WALK, the list gpu/flash.py hands rung 6): every tile of every plane once; the plain walk's pairs
    (Tr − 1 − q, q), unit u to block u mod 132, but for the last whole round and the rest, dealt tile by tile; the
    busiest block's K/V blocks + tiles within 1% of the mean at 16k tokens (the plain walk: 3.1% above it, 15.5
    rounds of pairs)."""
    units, blocks, tr = grids.causal_walk(planes, n, nk, br, 128, 132), 132, -(-n // br)
    assert units.dtype == np.int32 and units.shape[1] == 4
    real = units[units[:, 0] >= 0]
    assert (real[:, 3] == 0).all() and (units[units[:, 0] < 0] == -1).all()
    seen = sorted((int(p), int(i)) for p, *tiles in real[:, :3] for i in tiles if i >= 0)
    assert seen == [(p, i) for p in range(planes) for i in range(tr)]
    per = (tr + 1) // 2
    if planes * per <= blocks:  # one unit a thread block: the plain walk's list
        assert len(units) == planes * per
        return
    kept = (planes * per // blocks - 1) * blocks
    for u, (p, first, second, _) in enumerate(units[:kept]):  # the plain walk's unit u
        assert (p, first, second) == (u // per, tr - 1 - u % per, u % per if u % per != tr - 1 - u % per else -1)
    assert len(units) % blocks == 0 and (units[kept:, 2] == -1).all()
    if n == nk and planes * n == 512 * 1024:  # 16k tokens, hidden 2048 at d = 64
        last = np.minimum((np.arange(tr) + 1) * br, n) - 1
        work = np.minimum(last // 128 + 1, -(-nk // 128)) + 1  # per tile: K/V blocks + 1
        per_unit = [sum(work[i] for i in t if i >= 0) if p >= 0 else 0 for p, *t in units[:, :3]]
        load = np.bincount(np.arange(len(units)) % blocks, per_unit)
        assert load.max() <= 1.01 * load.mean()


def test_odd_tr_leaves_the_middle_q_block_alone_and_a_short_grid_takes_one_unit_each():
    # Tr = 5: units (4, 0), (3, 1), (2) per plane; one plane on 4 SMs: grid min(3, 4) = 3, the pairs themselves
    assert grids.persistent_walk(80, 80, 16, 16, 1, True, 4) == [[(0, 4), (0, 0)], [(0, 3), (0, 1)], [(0, 2)]]
    assert grids.causal_walk(1, 80, 80, 16, 16, 4).tolist() == [[0, 4, 0, 0], [0, 3, 1, 0], [0, 2, -1, 0]]


def test_full_walk_takes_q_blocks_in_order_grid_apart():
    # not causal: a unit is one Q block; Tr = 3, 2 planes: units (0,0) (0,1) (0,2) (1,0) (1,1) (1,2) on 4 SMs
    assert grids.persistent_walk(48, 48, 16, 16, 2, False, 4) == [
        [(0, 0), (1, 1)],
        [(0, 1), (1, 2)],
        [(0, 2)],
        [(1, 0)],
    ]


# a tiny causal grid: N = Nk = 64, Br = Bc = 16, d = 16, fp16; Tr = 4, one plane, 4 SMs
TINY = (64, 64, 16, 2, 16, 16, True, 1)
Q = O = 16 * 16 * 2  # 512 bytes: Q_i, O_i
KV = 2 * 16 * 16 * 2  # 1024 bytes: K_j and V_j
L = 4 * 16  # 64 bytes: L_i


def test_the_short_half_comes_back_to_k0_after_the_long_half_has_moved_on():
    # Persistent: 2 units < 4 SMs, so 2 blocks. Block 0 walks Q block 3 (K/V 0 … 3) then 0 (K/V 0); block 1 walks 2
    # (K/V 0 … 2) then 1 (K/V 0, 1). One step per K/V block and one for the stores, both blocks 7 steps:
    #   tick  block 0          block 1
    #   0     Q3, KV0          Q2, KV0
    #   1     KV1              KV1
    #   2     KV2              KV2
    #   3     KV3              O2, L2 (writes)
    #   4     O3, L3           Q1, KV0
    #   5     Q0, KV0          KV1
    #   6     O0, L0           O1, L1
    k = grids.flash2_forward(*TINY, sms=4)
    assert len(k.blocks) == 2 and [b.tiles for b in k.blocks] == [4 + 1, 3 + 2]
    # L2 of 4096 bytes, LRU (requests in a tick in block order, each tile once):
    #   t0 Q3, KV0, Q2 miss: 2048 bytes held. t1 KV1, t2 KV2 miss: 4096 (full).
    #   t3 KV3 miss: out go Q3, KV0 (3584); O2 (4096); L2: out goes Q2 (3648). Held: KV1 KV2 KV3 O2 L2.
    #   t4 O3: out KV1 (3136); L3 (3200); Q1 miss (3712); KV0 miss: out KV2 (3712). Held: KV3 O2 L2 O3 L3 Q1 KV0.
    #   t5 Q0 miss: out KV3 (3200); KV0 hit; KV1 miss: out O2, dirty (3712). Held: L2 O3 L3 Q1 Q0 KV0 KV1.
    #   t6 O0: out L2, O3, dirty (3648); L0 (3712); O1: out L3 dirty, Q1 (3648); L1 (3712).
    t = l2.play(k, 4, 4096)
    assert t.dram_read == 2 * Q + KV + KV + KV + KV + (Q + KV) + (Q + KV) == 8192  # K/V 0, 1 read twice
    assert t.dram_write == O + L + O + L  # O2, L2, O3, L3 evicted dirty
    assert t.left_dirty == O + L + O + L  # O0, L0, O1, L1 still in L2
    assert t.asked_write == 4 * (O + L)
    # One block per tile, the longest rows first, 4 at once: all start at tick 0, so K/V block j is asked for at
    # tick j only, by every block that sees it; each tile is read once: 4 Q_i and 4 K/V blocks
    assert l2.play(grids.flash2_forward(*TINY), 4, 4096).dram_read == 4 * Q + 4 * KV == 6144
    # with room for everything the persistent walk reads each tile once too
    assert l2.play(k, 4, 1 << 20).dram_read == 6144


def test_a_later_tiles_first_loads_hide_behind_the_end_of_the_tile_before():
    ms = 4096 * H100.clock_hz * 1e-3  # wgmma FLOPs one SM does in a millisecond
    dram_ms = H100.hbm_bandwidth / SMS * 1e-3  # bytes of one SM's share of DRAM in a millisecond
    l2_ms = H100.l2_bandwidth / SMS * 1e-3
    alone = Launch(128, 200 * 1024, 64, "wgmma")  # one block per SM

    def tile(loads_ms):  # one step of 1 ms of matmuls; its first loads, 0.25 ms of stores
        return grids.Block(round(ms), 0, 0, lambda: iter(()), 1, round(loads_ms * dram_ms), round(0.25 * l2_ms))

    # two tiles on each SM: 2 ms of matmuls, the first tile's loads (2 ms), both tiles' stores (0.5 ms); the second
    # tile's loads start once the first tile's S is done, under its P̃V (0.5 ms: half its FLOPs) and its stores
    # (0.25 ms): 2 − 0.75 = 1.25 ms exposed; in all 2 + 2 + 0.5 + 1.25 = 5.75 ms, 3.75 of it loads and stores
    t = timing.kernel_time([grids.chained([tile(2), tile(2)])] * SMS, alone, H100, 0, 0)
    assert t.compute == pytest.approx(5.75e-3, rel=1e-6)
    assert t.terms[timing.FILL] == pytest.approx(3.75e-3, rel=1e-6)
    # loads of 0.5 ms hide wholly: 2 ms of matmuls, 0.5 of first loads, 0.5 of stores
    t = timing.kernel_time([grids.chained([tile(0.5), tile(0.5)])] * SMS, alone, H100, 0, 0)
    assert t.compute == pytest.approx(3e-3, rel=1e-6)


def test_rung_6_forward_is_modelled_persistent_and_the_backward_is_not():
    assert launch_of(registry.FORWARD[6], 128).persistent
    assert not launch_of(registry.BACKWARD[7], 128).persistent
    assert not launch_of(registry.FORWARD[3], 128).persistent


def test_o_i_through_its_own_buffer_leaves_only_the_last_tiles_store_exposed():
    # TINY's walk (2 units on 4 SMs): block 0 walks Q blocks 3, 0, block 1 walks 2, 1. From registers or the K_j
    # buffer every tile's O_i and L_i are stored before the next tile starts: 2 · (512 + 64) a block. Through O_BUF's
    # buffer the TMA unit writes O_i while the next tile runs: each tile's L_i (64) and the last tile's O_i (512),
    # whose store the block waits for before it ends: 512 + 2 · 64 = 640. The bytes written to L2 are the same.
    plain, buffered = grids.flash2_forward(*TINY, sms=4), grids.flash2_forward(*TINY, sms=4, o_buffer=True)
    assert [b.epilogue for b in plain.blocks] == [2 * (O + L)] * 2
    assert [b.epilogue for b in buffered.blocks] == [O + 2 * L] * 2
    assert [[t.epilogue for t in b.parts] for b in buffered.blocks] == [[L, O + L]] * 2
    assert l2.play(buffered, 4, 4096) == l2.play(plain, 4, 4096)


@pytest.mark.parametrize(("d", "n", "causal", "br", "buffer", "ring"), [
    (64, 16384, False, 192, True, 0), (64, 1024, True, 128, True, 0), (128, 1024, True, 128, False, 0),
    (128, 16384, False, 128, False, 16),
])  # fmt: skip
def test_rung_6s_launch_holds_o_is_own_buffer_at_d_64(d, n, causal, br, buffer, ring):
    # shared memory of one thread block: 1024 (alignment) + Q_i (Br · d · 2) + 3 stages of K_j and V_j (2 · 3 · 128 ·
    # d · 2) + O_i's buffer (Br · d · 2, where it fits under the 232,448 bytes a block may opt into) + 11 mbarriers + the
    # ticketed walk's ring of two tiles (i, plane) the producer hands the consumers (16, d = 128 long rows):
    #   d = 64, Br = 192: 1024 + 24,576 + 98,304 + 24,576 + 88 = 148,568; Br = 128: 1024 + 16,384 + 98,304 + 16,384
    #   + 88 = 132,184; d = 128, Br = 128: 1024 + 32,768 + 196,608 + 88 (+ 16) = 230,488 (230,504; a buffer would need
    #   263,256)
    spec = registry.FORWARD[6]
    tiles = spec.tiles_for(d, n, causal)
    launch = launch_of(spec, d, tiles)
    halves = br * d + 2 * 3 * 128 * d + (br * d if buffer else 0)
    assert tiles.block_rows == br and launch.o_buffer == buffer
    assert launch.smem_bytes == 1024 + 2 * halves + 8 * 11 + ring
    assert blocks_per_sm(launch, H100) == 1


def test_rung_6s_work_is_its_whole_tiles_with_a_rows_statistics_on_four_threads():
    # N = Nk = 100, d = 16, Br = 64, Bc = 32, full: Q blocks of 64 and 36 rows, each sees the 4 K/V blocks (32, 32,
    # 32, 4 keys). The closed form's work: 4·r·100·16 FLOPs, r·100 exponentials and r·4 rescales. The kernel's
    # (whole_tiles): 64 rows and 4 · 32 keys in each, 4·64·128·16 = 524,288 FLOPs; 64·128 = 8192 exponentials, and
    # each of a row's 4 threads one rescale a K/V block and one 1/ℓ a tile: 4 · 64 · (4 + 1) = 1280
    shape = (100, 100, 16, 2, 64, 32)
    closed, whole = grids.flash2_forward(*shape), grids.flash2_forward(*shape, whole_tiles=True)
    assert [(b.flops, b.exps) for b in closed.blocks] == [(409_600, 6656), (230_400, 3744)]
    assert [(b.flops, b.exps) for b in whole.blocks] == [(524_288, 8192 + 1280)] * 2
    # causal, N = Nk = 128: Q block 0 (rows 0 … 63) sees K/V blocks 0, 1 (its diagonal's masked half computed
    # too): 64·64 + 4·64·3 = 4864 exponentials; Q block 1 all four: 64·128 + 4·64·5 = 9472
    causal = grids.flash2_forward(128, 128, 16, 2, 64, 32, True, whole_tiles=True)
    assert sorted(b.exps for b in causal.blocks) == [4864, 9472]
    # rung 6's launch counts so; the other forward rungs keep the closed form's
    assert launch_of(registry.FORWARD[6], 64).whole_tiles and not launch_of(registry.FORWARD[3], 64).whole_tiles
