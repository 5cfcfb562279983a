"""The time model's exposed work (first loads, last stores), dQ's additions (atomics or TMA reduce-adds) and the
host's share of a call, against hand-worked cases; the backward rungs' reads of L_i, D_i and additions into dQ_i."""

from dataclasses import replace

import pytest

from sim.core.errors import InputError
from sim.machine import grids, hardware, l2, timing
from sim.machine.launch import Launch

H100 = hardware.get("H100-SXM")
SMS = H100.sm_count  # 132
ONE_MS = 4096 * 1.83e6  # wgmma FLOPs one H100 SM does in a millisecond (4096 per clock at 1.83 GHz)
ALONE = Launch(128, 200 * 1024, 64, "wgmma")  # 200 KiB of shared memory: one block per SM
PAIR = Launch(128, 100 * 1024, 64, "wgmma")  # two fit an SM
DRAM_MS = 3350e9 / SMS * 1e-3  # bytes one SM's share of DRAM (3.35 TB/s over 132 SMs) moves in a millisecond
L2_MS = 8.4e12 / SMS * 1e-3  # likewise for L2 (8.4 TB/s)


def _blocks(n, flops=0, prologue=0, epilogue=0, atomics=0):
    return [grids.Block(flops, 0, 0, lambda: iter(()), 0, prologue, epilogue, atomics) for _ in range(n)]


def test_first_loads_and_last_stores_follow_the_matmuls_of_a_block_alone():
    # per block: 1 ms of matmuls, 1 ms of first loads (its SM's share of DRAM), 1 ms of last stores (of L2)
    blocks = _blocks(SMS, flops=ONE_MS, prologue=round(DRAM_MS), epilogue=round(L2_MS))
    t = timing.kernel_time(blocks, ALONE, H100, 0, 0)
    assert t.compute == pytest.approx(3e-3, rel=1e-6)
    assert t.terms[timing.FILL] == pytest.approx(2e-3, rel=1e-6)
    assert t.seconds == pytest.approx(3e-3 + H100.launch_seconds, rel=1e-6)
    assert t.bound == timing.TENSOR  # the fill is latency, not a pipe
    # one block more: a last partial wave of one block costs a whole block, fill included
    t = timing.kernel_time([*blocks, blocks[0]], ALONE, H100, 0, 0)
    assert t.compute == pytest.approx(6e-3, rel=1e-6)


def test_a_second_resident_block_hides_the_fill():
    # 264 blocks two to an SM: each SM runs 2 ms of matmuls (its rate shared), the fill of one under the other's
    blocks = _blocks(2 * SMS, flops=ONE_MS, prologue=round(DRAM_MS), epilogue=round(L2_MS))
    t = timing.kernel_time(blocks, PAIR, H100, 0, 0)
    assert t.compute == pytest.approx(2e-3)
    assert t.terms[timing.FILL] == 0


def test_dq_additions_drain_beside_the_compute_at_their_own_rate():
    atomic, bulk = 1.5e12, 3e12
    hw = replace(H100, l2_atomic_bandwidth=atomic, l2_reduce_bandwidth=bulk)
    per_block = round(atomic / SMS * 2.4e-3)  # 2.4 ms of one SM's share of the atomic rate, 1.2 ms of the bulk rate
    blocks = _blocks(SMS, flops=ONE_MS, atomics=per_block)
    # rung 5, atomics: max(1 ms of matmuls, 2.4 ms of atomics over the chip)
    t = timing.kernel_time(blocks, ALONE, hw, 0, 0)
    assert t.terms[timing.ATOMICS] == pytest.approx(2.4e-3, rel=1e-6)
    assert t.compute == pytest.approx(1e-3, rel=1e-6)
    assert t.seconds == pytest.approx(2.4e-3 + hw.launch_seconds, rel=1e-6)
    assert t.bound == timing.ATOMICS
    # rung 7, TMA reduce-adds: the same bytes at twice the rate, 1.2 ms, beside 1 ms of matmuls: the SMs wait on them
    # (resident 1.2 ms, the tensor pipe busy 1/1.2 of it), L2 busy 1.2 ms of the kernel's 1.2 ms + the launch
    t = timing.kernel_time(blocks, replace(ALONE, dq_bulk=True), hw, 0, 0)
    assert t.terms[timing.REDUCES] == pytest.approx(1.2e-3, rel=1e-6) and timing.ATOMICS not in t.terms
    assert t.seconds == pytest.approx(1.2e-3 + hw.launch_seconds, rel=1e-6)
    assert t.utilization[timing.TENSOR] == pytest.approx(1 / 1.2, rel=1e-6)
    assert t.bound == timing.REDUCES
    # twice the matmuls: the SMs bound it, the additions hidden
    t = timing.kernel_time(_blocks(SMS, flops=2 * ONE_MS, atomics=per_block), replace(ALONE, dq_bulk=True), hw, 0, 0)
    assert t.seconds == pytest.approx(2e-3 + hw.launch_seconds, rel=1e-6)
    assert t.bound == timing.TENSOR
    # the datasheet gives neither rate: the terms stay out
    assert timing.kernel_time(blocks, ALONE, H100, 0, 0).terms[timing.ATOMICS] == 0
    assert timing.kernel_time(blocks, replace(ALONE, dq_bulk=True), H100, 0, 0).terms[timing.REDUCES] == 0


def test_the_host_sets_the_pace_of_short_calls():
    # back to back, a call's host work overlaps the previous call's kernels: the slower of the two per call
    assert timing.per_call(20e-6, 70e-6) == 70e-6
    assert timing.per_call(1e-3, 70e-6) == 1e-3


def test_forward_blocks_first_loads_and_last_stores_by_hand():
    # N = 256, d = 64, fp16, Br = Bc = 64: a block first loads Q_i (64 × 64 × 2) and K_0, V_0 (2 × 64 × 64 × 2),
    # and last stores O_i (64 × 64 × 2) and L_i (64 float32)
    b = grids.flash2_forward(256, 256, 64, 2, 64, 64).blocks[0]
    assert (b.prologue, b.epilogue, b.atomics) == (8192 + 16384, 8192 + 256, 0)


def test_the_backward_reads_l_and_d_once_per_step_and_adds_dq_once_or_twice():
    # N = Nk = 128, d = 64, Br = 64, Bc = 128: one K/V block, two Q blocks; L_i, D_i once per Q block (rung 7: one
    # bulk copy into the stage); dQ_i added once (SPLIT_DQ) or twice (each consumer its 64 keys' share of all of it)
    one = grids.flash2_backward(128, 128, 64, 2, 64, 128)[1]
    two = grids.flash2_backward(128, 128, 64, 2, 64, 128, dq_adders=2)[1]
    a, b = (l2.play(k, 132, 50 << 20) for k in (one, two))
    kv, qdo, ld, dq = 2 * 128 * 64 * 2, 2 * (2 * 64 * 64 * 2), 2 * (2 * 64 * 4), 2 * 64 * 64 * 4
    assert a.reduced == dq and b.reduced == 2 * dq
    assert l2.l2_to_sm(a) == l2.l2_to_sm(b) == kv + qdo + ld  # the additions are not reads to the SMs
    assert b.dram_read == a.dram_read  # the second additions hit in L2
    assert two.blocks[0].atomics == 2 * dq and one.blocks[0].atomics == dq
    # first loads: K_j, V_j, then Q_0, dO_0, L_0, D_0; last stores dK_j, dV_j
    assert one.blocks[0].prologue == kv + 2 * 64 * 64 * 2 + 2 * 64 * 4
    assert one.blocks[0].epilogue == kv


def test_rung_launches_say_how_they_add_dq():
    from gpu import registry
    from gpu.lab.predict import launch_of
    from gpu.tiling import backward_warpgroup_tiles

    seven = registry.rung(7)
    r5, r7_64, r7_128 = launch_of(registry.rung(5), 64), launch_of(seven, 64), launch_of(seven, 128)
    assert (r5.dq_adders, r5.dq_bulk) == (1, False)  # float32 atomics per element
    assert (r7_64.dq_adders, r7_64.dq_bulk) == (1, True) == (r7_128.dq_adders, r7_128.dq_bulk)  # SPLIT_DQ, TMA
    unsplit = launch_of(seven, 64, backward_warpgroup_tiles(stages=2))
    atomics = launch_of(seven, 128, backward_warpgroup_tiles(stages=2, split_dq=True, dq_atomics=True))
    assert (unsplit.dq_adders, unsplit.dq_bulk) == (2, True)
    assert (atomics.dq_adders, atomics.dq_bulk) == (1, False)
    # rung 7's shared memory at d = 64, Br = 128 (its default), from the kernel's layout: 1024 of alignment, K_j
    # and V_j (2 × 128 × 64 × 2), two stages of Q_i, dO_i (2 × 2 × 128 × 64 × 2), two dS_ij buffers per consumer
    # (2 × 2 × 128 × 64 × 2), the float32 dQ products (2 × 64 × 64 × 4), L_i, D_i per stage (2 × 2 × 128 × 4), and
    # 5 mbarriers: one block per SM
    assert r7_64.smem_bytes == 1024 + 32768 + 65536 + 65536 + 32768 + 2048 + 40
    assert r7_64.threads == 384


def test_calibration_sets_the_rates_of_dq_additions_when_recorded():
    rates = {"dram_read": 3e12, "l2_read": 8e12, "exp2_per_sm": 3e10, "fma_per_sm": 2e11, "tensor_fp16": 8e14,
             "launch_seconds": 5e-6}  # fmt: skip
    old = hardware.calibrated(H100, rates)  # an older recording: the terms stay out
    assert (old.l2_atomic_bandwidth, old.l2_reduce_bandwidth) == (0, 0)
    new = hardware.calibrated(H100, rates | {"l2_atomic": 1.5e12, "l2_bulk_reduce": 4e12})
    assert (new.l2_atomic_bandwidth, new.l2_reduce_bandwidth) == (1.5e12, 4e12)
    for key in ("l2_atomic", "l2_bulk_reduce"):
        for bad in (-1.0, float("inf"), "fast", True):
            with pytest.raises(InputError, match=rf"^calibration: '{key}'"):
                hardware.calibrated(H100, rates | {key: bad})


def test_the_h100_presets_latencies_are_the_recorded_calibrations():
    # sim.machine.hardware.H100_LATENCIES are gpu/lab/results/calibration-h100.json's "latencies", rounded to a clock
    import json
    from pathlib import Path

    recorded = json.loads((Path(__file__).parents[1] / "gpu/lab/results/calibration-h100.json").read_text())
    lat = hardware.latencies_of(recorded["latencies"])
    assert {k: (round(a), round(b)) for k, (a, b) in lat["wgmma_clocks"].items()} == H100.wgmma_clocks
    assert round(lat["turn_clocks"]) == H100.turn_clocks and round(lat["reduce_clocks"]) == H100.reduce_clocks
    assert {k: round(v) for k, v in lat["stage_clocks"].items()} == H100.stage_clocks
    assert round(lat["branch_clocks"], 1) == H100.branch_clocks  # a tenth of a clock: ~10 clocks a branch
    assert {k: round(v) for k, v in lat["fence_clocks"].items()} == H100.fence_clocks
    assert "alone" in recorded["latencies"]["fence_clocks"] and "alone" not in lat["fence_clocks"]
    # and a calibration with latencies sets them (without, the preset's stay)
    tuned = hardware.calibrated(H100, recorded["rates"], recorded["latencies"])
    assert tuned.wgmma_clocks == lat["wgmma_clocks"] and tuned.reduce_clocks == lat["reduce_clocks"]
    assert hardware.calibrated(H100, recorded["rates"]).wgmma_clocks == H100.wgmma_clocks
