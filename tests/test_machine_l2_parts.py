"""L2 as its parts (run 41-model11): each part's busy time is Σ over the kinds of work of bytes × that kind's cost on
the part, measured by calibrate's loops; L2's utilization is the busiest part. Expected values worked by hand."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpu import registry
from gpu.lab.l2_parts import loop_work, part_costs, prefetch_costs
from gpu.lab.predict import launch_of
from sim.machine import grids, hardware, timing
from sim.machine.hardware import L2_WORK, PS, Hardware
from sim.machine.launch import Launch
from sim.machine.prediction import crossing_reads, predict

H100 = hardware.get("H100-SXM")
RECORDING = Path(__file__).resolve().parents[1] / "gpu/lab/results/l2-parts-h100.json"
PAIRS = RECORDING.with_name("l2-tags-pairs-h100.json")  # rung 6 with and without Q_i's prefetch (run 44-model16)


def test_a_parts_busy_time_is_its_work_by_kind_at_each_kinds_cost():
    # two parts: "in" costs 1 ps a byte of 16-byte store pieces and 0.3 ps a byte reduce-added; "out" 0.1 ps a byte
    # read. 1 GB read, 100 MB stored in pieces, 200 MB added: in = 100 µs + 60 µs, out = 100 µs
    hw = Hardware("toy", 1, 1.0, 1, 1, 1, 1, {}, "hand-made",
                  l2_parts={"in": (0, 0, 0, 0, 1 * PS, 0, 0.3 * PS, 0), "out": (0.1 * PS, 0, 0, 0, 0, 0, 0, 0)})  # fmt: skip
    work = {"read": 1e9, "store_pieces": 1e8, "reduced": 2e8}
    assert timing.l2_parts(work, hw) == pytest.approx({"in": 160e-6, "out": 100e-6})
    # a kind no loop measured (rung 5's atomics): no parts; a part without parts: none either
    assert timing.l2_parts(work | {"atomics": 1.0}, hw) == {}
    assert timing.l2_parts(work, hardware.get("A100-40GB")) == {}


def test_l2s_busiest_part_is_its_busy_time_in_the_bound():
    # 132 blocks of 1 ms of matmuls (one per SM); L2's parts as above: 1.2 ms on "in" (7.5 GB of 16-byte pieces at
    # 0.16 ps) beats the tensor pipe's 1 ms, and L2 (its busiest part) bounds. The old rule (L2's bytes at its peak)
    # would have L2 at 8.4 TB/s · 1 ms / 10.3 TB/s < 1 ms: tensor
    hw = Hardware("toy", 10**12, 3.35e12, 227 * 1024, 256 * 1024, 132, 50 << 20, {}, "hand-made",
                  l2_bandwidth=8.4e12, l2_peak_bandwidth=10.3e12, clock_hz=1.83e9, smem_per_sm_bytes=228 * 1024,
                  tensor_per_clock={"wgmma": 4096}, l2_parts={"in": (0, 0, 0, 0, 0.16 * PS, 0, 0, 0)})  # fmt: skip
    blocks = [grids.Block(4096 * 1.83e6, 0, 0, lambda: iter(())) for _ in range(132)]
    launch = Launch(128, 200 * 1024, 64, "wgmma")
    t = timing.kernel_time(blocks, launch, hw, 0, 8.4e9, {"store_pieces": 7.5e9})
    assert t.l2_parts == pytest.approx({"in": 1.2e-3})
    assert t.units[timing.L2] == pytest.approx(1.2e-3) and t.bound == timing.L2
    old = timing.kernel_time(blocks, launch, hw, 0, 8.4e9)
    assert old.l2_parts is None and old.units[timing.L2] == pytest.approx(8.4e9 / 10.3e12)
    assert old.bound == timing.TENSOR


# H100's costs (ps a byte) of read, fill, cross_read, write_back, store_pieces, store_wide, reduced, prefetch on the two
# parts rung 7 loads most (the preset's, fitted to the loops and rung 6's pairs: the last tests)
XBAR2LTS = (0.0375, 0.0, 0.0, 0.0, 0.9118, 0.2290, 0.2865, 0.0554)
FABRIC = (0.0046, 0.1841, 0.1915, 0.0242, 0.4608, 0.2318, 0.2776, 0.1143)


def test_a_tile_read_by_k_blocks_crosses_l2s_halves_for_all_but_half_to_the_k():
    # N = 256, d = 64, one head, full, Br = Bc = 128, rung 7's main kernel: K_j, V_j (32,768 bytes a block) read by
    # block j alone: ½ crosses; Q_i, dO_i (32,768) and L_i, D_i (1024) by both blocks: ¾; dQ_i's read-for-adds none
    (kernel,) = [k for k in grids.flash2_backward(256, 256, 64, 2, 128, 128, False, 1) if k.name.endswith("backward")]
    assert crossing_reads(kernel, 2) == 2 * 32_768 / 2 + 2 * (32_768 + 1024) * 3 / 4  # 83,456
    assert crossing_reads(kernel, 1) == 0  # one L2: nothing crosses


def test_rung_7s_main_kernel_loads_l2s_parts_with_its_reads_fills_stores_and_adds():
    # N = 256, d = 64, fp16, one head, full, Br = Bc = 128: K/V blocks j = 0, 1, each seen by Q blocks i = 0, 1.
    # Reads L2 hands the SMs: K_j, V_j once a block (2 · 2 · 128 · 64 = 32,768 each), Q_i, dO_i each step (32,768)
    # and L_i, D_i (2 · 4 · 128 = 1024): 2 · 32,768 + 4 · 33,792 = 200,704. All fits L2: each tile filled once from
    # DRAM, and dQ's accumulator lines too, read for their first add (2 · 128 · 64 · 4 = 65,536): 65,536 + 65,536 +
    # 2048 + 65,536 = 198,656; across the halves 83,456 (above); nothing written back. dK_j, dV_j stored in 16-byte
    # pieces: 65,536; dQ_i reduce-added each step: 4 · 32,768 = 131,072
    work = (200_704, 198_656, 83_456, 0, 65_536, 0, 131_072, 0)  # the backward prefetches nothing
    seven = registry.LADDER[7]
    p = predict("flash2", 256, 256, 64, 2, 128, 128, False, 1, H100, launch_of(seven, 64), backward=True)
    main = p.kernels[1].time
    xbar = sum(w * c for w, c in zip(work, XBAR2LTS, strict=True)) * PS
    fabric = sum(w * c for w, c in zip(work, FABRIC, strict=True)) * PS
    assert main.l2_parts["xbar2lts"] == pytest.approx(xbar, rel=1e-9)  # 104,834.2 ps
    assert main.l2_parts["ltcfabric2ltc"] == pytest.approx(fabric, rel=1e-9)  # 120,062.2 ps: the busiest
    assert main.units[timing.L2] == pytest.approx(fabric, rel=1e-9)
    # the pre-pass reads O and dO (2 · 2 · 256 · 64 = 65,536, each filled once, each tile by one block: half
    # across) and stores whole lines: the accumulator (256 · 64 · 4 = 65,536) and D (1024)
    pre = sum(w * c for w, c in zip((65_536, 65_536, 32_768, 0, 0, 66_560, 0, 0), XBAR2LTS, strict=True)) * PS
    assert p.kernels[0].time.l2_parts["xbar2lts"] == pytest.approx(pre, rel=1e-9)
    pre = sum(w * c for w, c in zip((65_536, 65_536, 32_768, 0, 0, 66_560, 0, 0), FABRIC, strict=True)) * PS
    assert p.kernels[0].time.l2_parts["ltcfabric2ltc"] == pytest.approx(pre, rel=1e-9)


def test_h100s_part_costs_are_the_fit_to_the_recorded_loops():
    # the preset's constants (4 decimals of a ps) are the fit to calibrate's nine loops, and the prefetch's the
    # difference rung 6's recorded pairs make (prefetch_costs)
    loops = json.loads(RECORDING.read_text())["loops"]
    assert len(loops) == 9
    fit = part_costs(loops, json.loads(PAIRS.read_text())["profiled"])
    named = {p.replace("_cycles_active", "").replace("_realtime", ""): p for p in fit}
    assert set(named) == set(H100.l2_parts)
    for part, costs in H100.l2_parts.items():
        for kind, cost in zip(L2_WORK, costs, strict=True):
            assert cost / PS == pytest.approx(fit[named[part]][kind] / PS, abs=6e-5)
    # the store and reduce-add loops' utilizations are a cost per byte: within a point on every part; the read loops'
    # are not (lines read by many blocks at once cost lts2xbar less a byte than lines read by one: gpu/NOTES.md run
    # 41-model11)
    for loop in loops:
        seconds = loop["gpu__time_duration.sum"] * 1e-9
        counted = timing.l2_parts(loop_work(loop), H100)
        off = max(
            abs(counted[p] / seconds * 100 - loop[f"lts__{named[p]}.avg.pct_of_peak_sustained_elapsed"]) for p in named
        )
        assert (off <= 1.0) == (not loop["name"].startswith("read")), loop["name"]


def test_the_prefetchs_cost_is_the_busy_time_it_adds_over_the_bytes_it_prefetches():
    # one shape, d = 64, N = 1024, one head: Q is 1024 · 64 · 2 = 131,072 bytes. Part "x" with the prefetch 50% and
    # 52% of 1000 ns (median 0.51 µs), without it 40% of 1000 and 1100 ns (0.40 and 0.44 µs: median 0.42 µs): the
    # prefetch adds 0.09 µs, 0.09e-6 / 131,072 = 6.866e-13 s a byte; part "y" as busy either way: 0
    def row(build, x, y, ns):
        return {"d": 64, "n": 1024, "causal": True, "batch": 1, "heads": 1, "build": build,
                "gpu__time_duration.sum": ns, "lts__x.avg.pct_of_peak_sustained_elapsed": x,
                "lts__y_cycles_active.avg.pct_of_peak_sustained_elapsed": y}  # fmt: skip

    pairs = [row("call", 50, 30, 1000), row("no_prefetch", 40, 30, 1000), row("call", 52, 30, 1000),
             row("no_prefetch", 40, 30, 1000) | {"gpu__time_duration.sum": 1100}]  # fmt: skip
    pairs[3]["lts__y_cycles_active.avg.pct_of_peak_sustained_elapsed"] = 30 / 1.1  # y: 0.3 µs every time
    assert prefetch_costs(pairs) == pytest.approx({"x": 0.09e-6 / 131_072, "y_cycles_active": 0.0}, abs=1e-20)


def test_rung_6s_persistent_walk_prefetches_each_tiles_q_i_once():
    # a part that costs 1 ps a byte prefetched and nothing else. N = 256, d = 64, fp16, Br = Bc = 128: Q is
    # 256 · 64 · 2 = 32,768 bytes a head, each of its 2 tiles' Q_i (16,384) prefetched once: 1 head 32,768 ps, 3 heads
    # causal (every tile sees keys) 98,304 ps; the backward (rung 7) and rung 3's grid (a block a tile) prefetch nothing
    hw = replace(H100, l2_parts={"p": (0, 0, 0, 0, 0, 0, 0, 1 * PS)})
    six, three, seven = registry.LADDER[6], registry.LADDER[3], registry.LADDER[7]
    assert launch_of(six, 64).persistent and not launch_of(three, 64).persistent
    for heads, causal, ps in ((1, False, 32_768), (3, True, 98_304)):
        p = predict("flash2", 256, 256, 64, 2, 128, 128, causal, heads, hw, launch_of(six, 64))
        assert p.kernels[0].time.l2_parts == pytest.approx({"p": ps * PS}, rel=1e-12)
    p = predict("flash2", 256, 256, 64, 2, 128, 128, False, 1, hw, launch_of(three, 64))
    assert p.kernels[0].time.l2_parts == {"p": 0.0}
    p = predict("flash2", 256, 256, 64, 2, 128, 128, False, 1, hw, launch_of(seven, 64), backward=True)
    assert [k.time.l2_parts for k in p.kernels] == [{"p": 0.0}] * 3
