"""The time model's exposed work (first loads, last stores, dQ's atomics) and the host's share of a call, against
hand-worked cases; rung 7's reads of L_i, D_i and its additions into dQ_i in the grids."""

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
L2_MS = 5.5e12 / SMS * 1e-3  # likewise for L2 (5.5 TB/s)


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


def test_atomics_drain_beside_the_compute_or_in_series():
    rate = 1.5e12
    hw = replace(H100, l2_atomic_bandwidth=rate)
    per_block = round(rate / SMS * 2e-3)  # 2 ms of one SM's share of the atomic rate
    blocks = _blocks(SMS, flops=ONE_MS, atomics=per_block)
    # rung 5: they drain while the SMs compute: max(1 ms of matmuls, 2 ms of atomics over the chip)
    t = timing.kernel_time(blocks, ALONE, hw, 0, 0)
    assert t.terms[timing.ATOMICS] == pytest.approx(2e-3, rel=1e-6)
    assert t.seconds == pytest.approx(2e-3 + hw.launch_seconds, rel=1e-6)
    assert t.bound == timing.ATOMICS
    # rung 7: every step waits on L2, behind them: 1 + 2 ms per block
    t = timing.kernel_time(blocks, replace(ALONE, waits_on_l2=True), hw, 0, 0)
    assert t.compute == pytest.approx(3e-3, rel=1e-6)
    assert t.seconds == pytest.approx(3e-3 + hw.launch_seconds, rel=1e-6)
    assert t.bound == timing.ATOMICS
    # the datasheet gives no atomic rate: the term stays out
    assert timing.kernel_time(blocks, ALONE, H100, 0, 0).terms[timing.ATOMICS] == 0


def test_the_host_sets_the_pace_of_short_calls():
    # back to back, a call's host work overlaps the previous call's kernels: the slower of the two per call
    assert timing.per_call(20e-6, 70e-6) == 70e-6
    assert timing.per_call(1e-3, 70e-6) == 1e-3


def test_forward_blocks_first_loads_and_last_stores_by_hand():
    # N = 256, d = 64, fp16, Br = Bc = 64: a block first loads Q_i (64 × 64 × 2) and K_0, V_0 (2 × 64 × 64 × 2),
    # and last stores O_i (64 × 64 × 2) and L_i (64 float32)
    b = grids.flash2_forward(256, 256, 64, 2, 64, 64).blocks[0]
    assert (b.prologue, b.epilogue, b.atomics) == (8192 + 16384, 8192 + 256, 0)


def test_rung_7_reads_l_and_d_twice_and_at_d_64_adds_dq_twice():
    # N = Nk = 128, d = 64, Br = 64, Bc = 128: one K/V block, two Q blocks; both consumers read L_i, D_i, and
    # (d = 64) each adds its 64 keys' share of all of dQ_i
    one = grids.flash2_backward(128, 128, 64, 2, 64, 128)[1]
    two = grids.flash2_backward(128, 128, 64, 2, 64, 128, lse_readers=2, dq_adders=2)[1]
    a, b = (l2.play(k, 132, 50 << 20) for k in (one, two))
    kv, qdo, ld, dq = 2 * 128 * 64 * 2, 2 * (2 * 64 * 64 * 2), 2 * (2 * 64 * 4), 2 * 64 * 64 * 4
    assert a.reduced == dq and b.reduced == 2 * dq
    assert l2.l2_to_sm(b) == kv + qdo + 2 * ld  # asked twice, the atomics excluded as before
    assert l2.l2_to_sm(a) == kv + qdo + ld
    assert b.dram_read == a.dram_read  # the second reads and additions hit in L2
    assert two.blocks[0].atomics == 2 * dq and one.blocks[0].atomics == dq
    # first loads: K_j, V_j, then Q_0, dO_0, and L_0, D_0 once per reader; last stores dK_j, dV_j
    assert two.blocks[0].prologue == kv + 2 * 64 * 64 * 2 + 2 * (2 * 64 * 4)
    assert two.blocks[0].epilogue == kv


def test_rung_launches_say_how_they_read_l_d_and_add_dq():
    from gpu import registry
    from gpu.lab.predict import launch_of

    r5, r7_64, r7_128 = (
        launch_of(registry.rung(5), 64),
        launch_of(registry.rung(7), 64),
        launch_of(registry.rung(7), 128),
    )
    assert (r5.lse_readers, r5.dq_adders, r5.waits_on_l2) == (1, 1, False)
    assert (r7_64.lse_readers, r7_64.dq_adders, r7_64.waits_on_l2) == (2, 2, True)
    assert (r7_128.lse_readers, r7_128.dq_adders, r7_128.waits_on_l2) == (2, 1, True)  # SPLIT_DQ


def test_calibration_sets_the_atomic_rate_when_recorded():
    rates = {"dram_read": 3e12, "l2_read": 8e12, "exp2_per_sm": 3e10, "fma_per_sm": 2e11, "tensor_fp16": 8e14,
             "launch_seconds": 5e-6}  # fmt: skip
    assert hardware.calibrated(H100, rates).l2_atomic_bandwidth == 0  # an older recording: the term stays out
    assert hardware.calibrated(H100, rates | {"l2_atomic": 1.5e12}).l2_atomic_bandwidth == 1.5e12
    for bad in (-1.0, float("inf"), "fast", True):
        with pytest.raises(InputError, match=r"^calibration: 'l2_atomic'"):
            hardware.calibrated(H100, rates | {"l2_atomic": bad})
