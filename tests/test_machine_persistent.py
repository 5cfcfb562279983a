"""Rung 6's persistent launch in the machine model (`sim.machine.grids.persistent_walk`, `chained`, the refill in
`sim.machine.timing`): the order of the tiles each SM walks, the L2 outcome of that order and the time of a chained
block, each worked by hand here from 06_flash2_wgmma_tma.cu's `for_each_tile` (units b, b + grid, … for block b;
causal, a unit is the pair of Q blocks (Tr − 1 − q, q) of one plane, the longer first)."""

import pytest

from gpu import registry
from gpu.lab.predict import launch_of
from sim.machine import grids, hardware, l2, timing
from sim.machine.launch import Launch

H100 = hardware.get("H100-SXM")
SMS = H100.sm_count


def test_causal_walk_pairs_the_longest_q_block_with_the_shortest():
    # Tr = 4: 2 units per plane, (3, 0) and (2, 1); 3 planes: units 0 … 5, plane-major; grid min(6, 4) = 4
    assert grids.persistent_walk(4, 3, True, 4) == [
        [(0, 3), (0, 0), (2, 3), (2, 0)],  # block 0: units 0 and 4
        [(0, 2), (0, 1), (2, 2), (2, 1)],  # block 1: units 1 and 5
        [(1, 3), (1, 0)],  # block 2: unit 2
        [(1, 2), (1, 1)],  # block 3: unit 3
    ]


def test_odd_tr_leaves_the_middle_q_block_alone_and_a_short_grid_takes_one_unit_each():
    # Tr = 5: units (4, 0), (3, 1), (2) per plane; one plane on 4 SMs: grid min(3, 4) = 3
    assert grids.persistent_walk(5, 1, True, 4) == [[(0, 4), (0, 0)], [(0, 3), (0, 1)], [(0, 2)]]


def test_full_walk_takes_q_blocks_in_order_grid_apart():
    # not causal: a unit is one Q block; Tr = 3, 2 planes: units (0,0) (0,1) (0,2) (1,0) (1,1) (1,2) on 4 SMs
    assert grids.persistent_walk(3, 2, False, 4) == [[(0, 0), (1, 1)], [(0, 1), (1, 2)], [(0, 2)], [(1, 0)]]


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
