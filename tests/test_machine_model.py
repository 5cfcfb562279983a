"""The machine model below HBM (sim.machine: launch, grids, l2, timing) against hand-worked cases."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core.errors import InputError
from sim.machine import grids, hardware, iomodel, l2, prediction, timing
from sim.machine.launch import Launch, blocks_per_sm, capped_registers

H100 = hardware.get("H100-SXM")


def test_blocks_per_sm_by_hand():
    # 128 threads × 255 registers: 255·32 = 8160 per warp, rounded to 8192; 4 warps = 32768 of 65536: 2 blocks;
    # shared memory (55296 + 1024 reserved) fits 4 times in 228 KiB; threads 16 times: registers decide, 2
    assert blocks_per_sm(Launch(128, 55296, 255), H100) == 2
    # rung 6 at d = 128: 230480 + 1024 bytes of 233472: one block
    assert blocks_per_sm(Launch(384, 230480, 168, "wgmma"), H100) == 1
    # tiny blocks: 2048 threads / 64 = 32, the 32-block limit too
    assert blocks_per_sm(Launch(64, 0, 32), H100) == 32
    assert capped_registers(384) == 168  # 65536 / 384 = 170.7, down to a multiple of 8
    assert capped_registers(128, 2) == 255


def _forward(N, d, Br, heads, slots, capacity):
    kernel = grids.flash2_forward(N, N, d, 2, Br, Br, False, heads)
    return l2.play(kernel, slots, capacity)


def test_grid_that_fits_l2_reads_each_tile_once():
    # N = 256, d = 64, fp16, Br = Bc = 64, 2 heads, every block at once, a big L2
    t = _forward(256, 64, 64, heads=2, slots=8, capacity=50 << 20)
    tensor = 256 * 64 * 2  # one head's Q (or K, or V) in bytes
    assert t.dram_read == 2 * 3 * tensor  # Q, K, V once per head
    assert t.read == 2 * (tensor + 4 * 2 * tensor)  # asked: Q once, K and V once per Q block (Tr = 4)
    assert t.dram_write == 0
    assert t.left_dirty == 2 * (tensor + 256 * 4)  # O and L stay in L2, dirty
    assert t.read == iomodel.flash2(256, 256, 64, 2, 64, 64).hbm_read_bytes * 2  # asked = Theorem 2's count


def test_grid_that_does_not_fit_l2_misses_every_re_read():
    # one slot, an L2 of three K_j/V_j tiles (3 × 16384 B): a Q block cycles through 4 of them, so LRU keeps none
    kv_tile, q_tile, l_tile = 2 * 64 * 64 * 2, 64 * 64 * 2, 64 * 4
    t = _forward(256, 64, 64, heads=1, slots=1, capacity=3 * kv_tile)
    assert t.dram_read == 4 * (q_tile + 4 * kv_tile)  # = every byte asked
    assert t.dram_read == t.read
    # each block's O_i, L_i are evicted while the next block streams; the last block's stay
    assert t.left_dirty == q_tile + l_tile
    assert t.dram_write == 3 * (q_tile + l_tile)


def test_concurrent_blocks_of_one_head_share_k_and_v():
    # the same tiny L2 (three K/V tiles), but all 4 Q blocks at once in lockstep: each K_j, V_j is missed once
    kv_tile, q_tile = 2 * 64 * 64 * 2, 64 * 64 * 2
    t = _forward(256, 64, 64, heads=1, slots=4, capacity=3 * kv_tile + 4 * q_tile)
    assert t.dram_read == 4 * q_tile + 4 * kv_tile


def test_padded_rows_cost_one_and_a_half_at_l2():
    # backward, N = Nk = 128, d = 64, Br = 64, Bc = 128: one K/V block, two Q blocks
    main = grids.flash2_backward(128, 128, 64, 2, 64, 128)[1]
    t = l2.play(main, 132, 50 << 20)
    kv, qdo, ld = 2 * 128 * 64 * 2, 2 * (2 * 64 * 64 * 2), 2 * (2 * 64 * 4)
    assert t.reduced == 2 * 64 * 64 * 4  # dQ_i added in float32, twice 64 rows
    assert l2.l2_to_sm(t, ("KV", "QdO")) == 1.5 * (kv + qdo) + ld
    assert l2.l2_to_sm(t) == kv + qdo + ld


@pytest.mark.parametrize("causal", [False, True])
def test_blocks_work_adds_up_to_the_closed_form(causal):
    N, Nk, d, Br, Bc = 300, 200, 32, 64, 48  # ragged, N ≠ Nk
    fwd = grids.flash2_forward(N, Nk, d, 2, Br, Bc, causal)
    c = iomodel.flash2(N, Nk, d, 2, Br, Bc, causal)
    assert [sum(getattr(b, k) for b in fwd.blocks) for k in ("flops", "exps", "elementwise")] == [
        c.flops, c.exps, c.elementwise
    ]  # fmt: skip
    main = grids.flash2_backward(N, Nk, d, 2, Br, Bc, causal)[1]
    cb = iomodel.flash2_backward_kernels(N, Nk, d, 2, Br, Bc, causal)[1][1]
    assert [sum(getattr(b, k) for b in main.blocks) for k in ("flops", "exps", "elementwise")] == [
        cb.flops, cb.exps, cb.elementwise
    ]  # fmt: skip


def _blocks(n, flops=0, exps=0, elementwise=0):
    return [grids.Block(flops, exps, elementwise, lambda: iter(())) for _ in range(n)]


ONE_MS = 4096 * 1.83e6  # wgmma FLOPs one H100 SM does in a millisecond (4096 per clock at 1.83 GHz)
BIG = Launch(128, 200 * 1024, 64, "wgmma")  # one block per SM


def test_a_last_partial_wave_costs_a_whole_one():
    assert timing.makespan([1.0] * 133, 132) == 2.0
    assert timing.makespan([1.0] * 132, 132) == 1.0
    t = timing.kernel_time(_blocks(133, flops=ONE_MS), BIG, H100, 0, 0)
    assert t.compute == pytest.approx(2e-3)
    assert t.seconds == pytest.approx(2e-3 + H100.launch_seconds)
    assert t.waves == pytest.approx(133 / 132)
    assert t.bound == timing.TENSOR


def test_which_resource_bounds():
    # exponentials: 3 ms of MUFU per block (16 per clock), after 1 ms of matmul: 4 ms, bound by the MUFU
    t = timing.kernel_time(_blocks(132, flops=ONE_MS, exps=3 * 16 * 1.83e6), BIG, H100, 0, 0)
    assert t.compute == pytest.approx(4e-3)
    assert t.bound == timing.MUFU
    assert t.overlapped == pytest.approx(3e-3 + H100.launch_seconds)  # the roof: perfect overlap
    # 10 ms of DRAM traffic (3.35 TB/s) outweighs 1 ms of matmuls
    t = timing.kernel_time(_blocks(132, flops=ONE_MS), BIG, H100, int(3350e9 * 0.01), 0)
    assert t.seconds == pytest.approx(0.01 + H100.launch_seconds)
    assert t.bound == timing.DRAM
    # L2: 2 ms at 8.4 TB/s
    t = timing.kernel_time(_blocks(132, flops=ONE_MS), BIG, H100, 0, 8.4e12 * 0.002)
    assert t.bound == timing.L2
    # a kernel of 1 µs of matmuls waits for its 4 µs launch
    t = timing.kernel_time(_blocks(132, flops=ONE_MS / 1000), BIG, H100, 0, 0)
    assert t.seconds == pytest.approx(1e-6 + H100.launch_seconds)
    assert t.bound == timing.LAUNCH


def test_an_sm_pipe_is_busy_a_share_of_its_active_cycles_l2_of_the_kernels():
    # as ncu counts them (…pct_of_peak_sustained_active for an SM's pipes, …_elapsed for L2): 132 blocks of 0.7 ms
    # of matmuls then 0.3 ms of exponentials (1 ms, one per SM), a launch of 1 ms, L2 busy 0.8 ms at its 10.3 TB/s
    # peak (0.98 ms at the 8.4 TB/s its time takes). The kernel takes 2 ms, the SMs are active 1 ms of it: the tensor
    # pipe 0.7 / 1 = 70%, the MUFU 30%, L2 0.8 / 2 = 40%: the tensor pipe is the busiest, though L2's 0.8 ms is longer
    hw = replace(H100, launch_seconds=1e-3)
    blocks = _blocks(132, flops=0.7 * ONE_MS, exps=0.3 * 16 * 1.83e6)
    t = timing.kernel_time(blocks, BIG, hw, 0, 0.8e-3 * 10.3e12)
    assert t.seconds == pytest.approx(2e-3) and t.active == pytest.approx(1e-3)
    assert t.units[timing.TENSOR] == pytest.approx(0.7e-3) and t.units[timing.L2] == pytest.approx(0.8e-3)
    u = t.utilization
    assert (u[timing.TENSOR], u[timing.MUFU], u[timing.L2]) == pytest.approx((0.7, 0.3, 0.4))
    assert t.bound == timing.TENSOR
    # the same blocks held up by 4 ms of DRAM traffic: the SMs wait, resident, 4 ms: the tensor pipe 17.5%, DRAM 80%
    t = timing.kernel_time(blocks, BIG, hw, int(3350e9 * 4e-3), 0)
    assert t.active == pytest.approx(4e-3) and t.utilization[timing.TENSOR] == pytest.approx(0.175)
    assert t.utilization[timing.DRAM] == pytest.approx(0.8) and t.bound == timing.DRAM


def test_two_blocks_per_sm_share_its_rate():
    half = replace(H100, sm_count=1)
    two = Launch(128, 1024, 64, "wgmma")  # many blocks fit one SM: 16 by threads
    t = timing.kernel_time(_blocks(2, flops=ONE_MS), two, half, 0, 0)
    assert t.compute == pytest.approx(2e-3)  # two blocks at once, each at half the SM's rate


def test_run_json_and_table_say_where_the_time_goes():
    import json

    from click.testing import CliRunner

    from sim.cli import app

    args = ["run", "--algo", "flash2", "--n", "1024", "--d", "64", "--heads", "4", "--hardware", "H100-SXM"]
    out = CliRunner().invoke(app, [*args, "--counts-only", "--json"])
    m = json.loads(out.stdout)["machine"]
    # 4 heads of Q, K, V, 1024 × 64 fp16, each read from DRAM once: everything fits the 50 MiB L2
    assert m["dram_read_bytes"] == 4 * 3 * 1024 * 64 * 2
    assert m["bound"] in m["terms"]
    table = CliRunner().invoke(app, [*args, "--counts-only"], env={"COLUMNS": "160"}).output
    assert "where the time goes on H100-SXM" in table and f"bound: {m['bound']}" in table


def test_calibration_replaces_the_rates_it_measured():
    rates = {"dram_read": 3e12, "l2_read": 8e12, "exp2_per_sm": 16 * 1.83e9 * 2, "fma_per_sm": 64 * 1.83e9,
             "tensor_fp16": 989.4e12 / 2, "launch_seconds": 6e-6}  # fmt: skip
    hw = hardware.calibrated(H100, rates)
    assert (hw.hbm_bandwidth, hw.l2_bandwidth, hw.launch_seconds) == (3e12, 8e12, 6e-6)
    assert hw.mufu_per_clock == pytest.approx(32) and hw.fma_per_clock == pytest.approx(64)
    assert hw.tensor_rate("wgmma") == pytest.approx(4096 / 2 * 1.83e9)
    assert hw.tensor_rate("mma.sync") == pytest.approx(2730 / 2 * 1.83e9)
    assert hw.sm_count == H100.sm_count and hw.l2_bytes == H100.l2_bytes


@given(st.dictionaries(st.sampled_from(["dram_read", "l2_read", "exp2_per_sm", "fma_per_sm", "tensor_fp16",
                                         "launch_seconds", "other"]),
                       st.one_of(st.floats(allow_nan=True), st.integers(), st.text(max_size=3), st.none())))  # fmt: skip
@settings(max_examples=60, deadline=None)
def test_a_malformed_calibration_is_refused_in_one_line(rates):
    try:
        hw = hardware.calibrated(H100, rates)
    except InputError as e:
        assert str(e).startswith("calibration: ") and "\n" not in str(e)
    else:
        assert hw.hbm_bandwidth == rates["dram_read"] > 0


def test_the_bound_is_the_busiest_unit_at_the_datasheets_peaks_also_with_calibrated_rates():
    # per block 1 ms of matmuls and 1.1 ms of exponentials at the preset's peaks (4096 FLOPs, 16 exponentials a
    # clock at 1.83 GHz). Calibrated: the tensor rate half the datasheet's (as if measured at half the clock), the
    # MUFU's the datasheet's: the time is 2 + 1.1 = 3.1 ms, the tensor pipe's the longer term, but ncu would find
    # the MUFU the busier (1.1 ms of its peak cycles against 1 ms): the bound is the MUFU
    rates = {"dram_read": 3.35e12, "l2_read": 8.4e12, "exp2_per_sm": 16 * 1.83e9, "fma_per_sm": 128 * 1.83e9,
             "tensor_fp16": H100.peak("fp16") / 2, "launch_seconds": 4e-6}  # fmt: skip
    tuned = hardware.calibrated(H100, rates)
    assert tuned.datasheet is H100 and hardware.calibrated(tuned, rates).datasheet is H100
    t = timing.kernel_time(_blocks(132, flops=ONE_MS, exps=1.1 * 16 * 1.83e6), BIG, tuned, 0, 0)
    assert t.compute == pytest.approx(3.1e-3)
    assert t.terms[timing.TENSOR] == pytest.approx(2e-3) and t.units[timing.TENSOR] == pytest.approx(1e-3)
    assert t.bound == timing.MUFU
    # with the preset's own rates the same: 2.1 ms, bound the MUFU
    t = timing.kernel_time(_blocks(132, flops=ONE_MS, exps=1.1 * 16 * 1.83e6), BIG, H100, 0, 0)
    assert t.compute == pytest.approx(2.1e-3) and t.bound == timing.MUFU


def test_l2s_work_counts_dram_lines_and_its_busy_time_is_at_ncus_peak():
    # N = 256, d = 64, fp16, Br = Bc = 64, 2 heads, a generic wgmma launch (every block resident at once, an L2 of
    # 25 MiB): the SMs read 2 · (Q + 4 · 2 · K) = 2 · (32,768 + 262,144) = 589,824 bytes and write O, L
    # (2 · (32,768 + 1024) = 67,584); L2 fills Q, K, V once from DRAM (2 · 3 · 32,768 = 196,608) and writes nothing
    # back: 854,016 bytes of L2 work
    one_rate = replace(H100, l2_parts={})  # L2 as one rate, as for a part whose L2 parts were never measured
    p = prediction.predict("flash2", 256, 256, 64, 2, 64, 64, False, 2, one_rate, Launch(128, 50_000, 168, "wgmma"))
    t = p.kernels[0].time
    assert (p.dram_read_bytes, p.dram_write_bytes) == (196_608, 0)
    assert t.terms[timing.L2] == pytest.approx(854_016 / 8.4e12)
    # the bound: L2's busy time at its peak as ncu counts it (10.3 TB/s), the SMs' units at theirs
    assert t.units[timing.L2] == pytest.approx(854_016 / 10.3e12)
    # with H100's parts (tests/test_machine_l2_parts.py), its busiest part: across the halves, where the fills
    # (196,608 bytes at 0.1841 ps), the reads' crossings (Q_i, 8192 bytes, read by one block: ½; K_j, V_j, 16,384,
    # by four: 15/16; 2 · (4 · 4096 + 4 · 15,360) = 155,648 bytes at 0.1915 ps), the reads (0.0046 ps) and the stores
    # in whole lines (0.2318 ps) meet
    p = prediction.predict("flash2", 256, 256, 64, 2, 64, 64, False, 2, H100, Launch(128, 50_000, 168, "wgmma"))
    t = p.kernels[0].time
    fabric = (589_824 * 0.0046 + 196_608 * 0.1841 + 155_648 * 0.1915 + 67_584 * 0.2318) * 1e-12
    assert max(t.l2_parts, key=t.l2_parts.get) == "ltcfabric2ltc"
    assert t.units[timing.L2] == pytest.approx(fabric, rel=1e-9)
    # 1.1 ms of L2 reads at 8.4 TB/s, 1 ms of matmuls: the time is L2's, but at its peak L2 is busy 0.897 ms, and
    # ncu would find the tensor pipe the busier
    t = timing.kernel_time(_blocks(132, flops=ONE_MS), BIG, H100, 0, 8.4e12 * 1.1e-3)
    assert t.seconds == pytest.approx(1.1e-3 + H100.launch_seconds)
    assert t.units[timing.L2] == pytest.approx(8.4 / 10.3 * 1.1e-3) and t.bound == timing.TENSOR


def test_a_grid_too_large_to_walk_is_refused_in_one_line_before_any_work(monkeypatch):
    import sim
    from sim.core.errors import InputError
    from sim.machine import grids
    from sim.machine.prediction import MOST_BLOCKS

    # 2**16 + 1 heads of one row block each (N = Br = 16): one thread block more than the time model walks
    r = sim.count("flash2", n=16, d=4, batch=MOST_BLOCKS + 1, heads=1)
    assert r.heads * -(-r.n // r.block_rows) == 2**16 + 1
    monkeypatch.setattr(grids, "flash2_forward", lambda *a, **k: pytest.fail("the grid was built"))
    with pytest.raises(InputError) as e:
        r.predict()
    assert str(e.value).count("\n") == 0
    assert "65,537 thread blocks (65,537 heads × 1 row blocks)" in str(e.value) and "65,536" in str(e.value)
