"""Rung 7 in the machine model: the shared-memory work its warps do beside wgmma, by hand and against the kernel's
PTX (the instruction counts the model's formula rests on), and its time terms."""

import re
import subprocess
from collections import Counter
from dataclasses import replace

import pytest

from gpu import registry, source
from gpu.lab.predict import WAVEFRONT, launch_of
from gpu.tiling import backward_warpgroup_tiles
from sim.machine import hardware
from sim.machine.grids import Block
from sim.machine.launch import Launch, Phase
from sim.machine.prediction import predict
from sim.machine.timing import kernel_time
from tests.test_kernels_compile import NVCC

SEVEN = registry.rung(7)
H100 = hardware.get("H100-SXM")


def test_shared_memory_per_tile_pair_by_hand():
    # per consumer warp (8 of them) and Q block step, wavefronts of 128 bytes:
    # dS_ij by stmatrix.x4.trans (512 bytes: 4 wavefronts), one per 16 queries: Br / 4 wavefronts
    # d = 128, Br = 64, dQ split by columns (64 each): L/D 16 + 8, dS 16, dQ 2 · 64 / 8 stores × 2 = 32  → 72
    assert launch_of(SEVEN, 128).smem_per_tile == 8 * 72 * 128
    # d = 64, Br = 128, dQ split by rows (64 columns each): L/D 32 + 16, dS 32, dQ 32 → 112
    assert launch_of(SEVEN, 64).smem_per_tile == 8 * 112 * 128
    # d = 128, Br = 64, not split: each warpgroup's two 64-column products over its own keys: dQ 2 × 32
    unsplit = launch_of(SEVEN, 128, backward_warpgroup_tiles(stages=2))
    assert unsplit.smem_per_tile == 8 * (16 + 8 + 16 + 64) * 128


@pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")
@pytest.mark.parametrize(
    ("d", "split"), [(64, True), (128, True), (128, False)], ids=["d64-br128", "d128-split", "d128-unsplit"]
)
def test_the_counts_are_the_kernels_ptx(tmp_path, d, split):
    tiles = backward_warpgroup_tiles(stages=2, split_dq=split, block_rows=128 if d == 64 else 64)
    cu = tmp_path / "r7.cu"
    cu.write_text(source.render(SEVEN.file, SEVEN.defines(d, "float16", tiles) | {"DETERMINISTIC": 0}))
    out = subprocess.run([NVCC, "-ptx", "-arch=sm_90a", "-std=c++17", str(cu), "-o", str(tmp_path / "r7.ptx")],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    ptx = Counter(re.findall(r"\b((?:ld|st)\.shared\.[\w.]+)", (tmp_path / "r7.ptx").read_text()))
    br = tiles.block_rows
    dq_stores = 2 * 64 // 8 * (1 if split else 2)  # st.shared.v2.f32: 2 · DQ_COLS / 8 per product, 64 columns each
    ptx |= Counter(re.findall(r"\b(stmatrix\.[\w.]+)", (tmp_path / "r7.ptx").read_text()))
    assert ptx == {"ld.shared.f32": br // 4, "ld.shared.v2.f32": br // 8, "st.shared.v2.f32": dq_stores,
                   "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16": br // 16}  # fmt: skip
    per_warp = br // 4 + br // 8 + br // 16 * 4 + 2 * dq_stores  # stmatrix.x4: 4 wavefronts; two-float stores: 2
    assert launch_of(SEVEN, d, tiles).smem_per_tile == 8 * per_warp * WAVEFRONT


def test_reduce_adds_bound_only_when_slower_than_the_sms():
    # d = 128, N = 4096, 1 × 16 heads, rung 7's launch: dQ's reduce-adds carry τ dS_ij K_j for every tile pair,
    # Br · d · 4 bytes each: 32 K/V blocks × 64 Q blocks × 64 · 128 · 4 bytes per head
    launch = launch_of(SEVEN, 128)
    added = 16 * 32 * 64 * 64 * 128 * 4
    rated = replace(H100, l2_reduce_bandwidth=added / 1.0)  # they take one second
    slow = predict("flash2", 4096, 4096, 128, 2, 64, 128, False, 16, rated, launch, backward=True)
    main = slow.kernels[1].time
    assert main.terms["dQ reduce-adds"] == pytest.approx(1.0)  # one second at that rate
    assert main.bound == "dQ reduce-adds" and main.seconds == pytest.approx(1.0 + H100.launch_seconds)
    fast = predict("flash2", 4096, 4096, 128, 2, 64, 128, False, 16, H100, launch, backward=True)
    assert "dQ reduce-adds" not in fast.terms()  # no rate in the datasheet preset: left out
    # the SMs set the time, as phases in series: the bound is the busiest unit, shared memory (3140 wavefronts of
    # 128 bytes per tile pair, test_step_phases_by_hand, against the tensor pipe's 2560 clocks)
    assert fast.kernels[1].time.in_series and fast.kernels[1].time.bound == "SRAM → registers"


@pytest.mark.parametrize("d", [64, 128])
def test_dq_bytes_added_are_what_ncu_counted_in_run_32(d):
    # 16k tokens at N = 4096: 4 × (2048 / d) heads; every one of the 32 K/V blocks adds τ dS_ij K_j into all of dQ
    # once (SPLIT_DQ at both d): 32 × 4096 × d × 4 bytes a head = 2³² bytes in all, at both d. ncu counted
    # 201,326,592 L2 reduction sectors at both d (gpu/NOTES.md run 32): 1.5 × 2³² / 32, the counter's 1.5 of run 33
    heads = 4 * 2048 // d
    tiles = SEVEN.default_tiles(d)
    p = predict("flash2", 4096, 4096, d, 2, tiles.block_rows, 128, False, heads, H100, launch_of(SEVEN, d), True)
    assert sum(k.traffic.reduced for k in p.kernels) == 32 * 4096 * d * 4 * heads == 2**32


def test_step_phases_by_hand():
    # SRAM bytes per tile pair (both consumer warpgroups, fp16), d = 128, Br = 64, Bc = 128, dQ split by columns:
    #   S_ijᵀ: A = K_j, 128 keys × 128 × 2 B = 32768; B = Q_i, 64 × 128 × 2 = 16384 per warpgroup, twice → 65536
    #   dP_ijᵀ: as S_ijᵀ, 65536, + L_i: 8 warps × 16 wavefronts × 128 B = 16384 → 81920
    #   dS_ijᵀ: D_i, 8 × 8 × 128 = 8192
    #   dV_j, dK_j, dQ_i: B of dV_j and dK_j (dO_i, Q_i: 16384 each per warpgroup) 4 × 16384 = 65536; dQ per
    #     warpgroup A = dS_ij 64 × 128 keys × 2 = 16384, B = K_j 128 keys × 64 columns × 2 = 16384 → 65536;
    #     dS_ij stores (stmatrix.x4.trans: Br / 4 wavefronts a warp) 8 × 16 × 128 = 16384 → 147456
    #   τ dQ_i → SRAM: 8 warps × 32 wavefronts × 128 = 32768
    #   TMA beside them: Q_i, dO_i 2 × 16384, L_i, D_i 2 × 64 × 4 = 512, the dQ tiles read out 2 × 64 × 64 × 4
    launch = launch_of(SEVEN, 128)
    assert [p.smem for p in launch.phases] == [65536, 81920, 8192, 147456, 32768]
    # wgmma's operand reads (4 × 65536) plus the warps' loads and stores, the count checked against the PTX above
    assert sum(p.smem for p in launch.phases) == 4 * 65536 + launch.smem_per_tile
    assert launch.smem_async == 32768 + 512 + 32768
    # d = 64, Br = 128, dQ split by rows: S_ijᵀ 128 × 64 × 2 + 2 × 128 × 64 × 2 = 49152; dP_ijᵀ 49152 + L_i
    # 8 × 32 × 128 = 32768; D_i 8 × 16 × 128; B of dV_j, dK_j 4 × 16384, dQ 2 × (64 × 128 × 2 + 128 × 64 × 2),
    # dS_ij 8 × 32 × 128; τ dQ_i 8 × 32 × 128
    launch = launch_of(SEVEN, 64)
    assert [p.smem for p in launch.phases] == [49152, 81920, 16384, 65536 + 65536 + 32768, 32768]
    assert sum(p.smem for p in launch.phases) == 2 * 49152 + 2 * 65536 + launch.smem_per_tile
    assert [p.tensor for p in launch.phases] == [0.2, 0.2, 0.0, 0.6, 0.0]  # five equal matmuls: S, dP | dV, dK, dQ
    assert [p.exps for p in launch.phases] == [0.0, 1.0, 0.0, 0.0, 0.0]


def test_step_time_phases_in_series_by_hand():
    # one tile pair of rung 7 at d = 64 (Br = Bc = 128) on the H100 preset, per clock: tensor 4096 FLOPs, MUFU 16,
    # FMA 128, SRAM 128 bytes. Work: 10 · 128 · 128 · 64 FLOPs = 2560 clocks, 128 · 128 exponentials = 1024 clocks,
    # 4 · 128 · 128 + 128 · 64 + 128 · 64 = 81920 other operations = 640 clocks. Phases, each its busiest unit:
    #   S_ijᵀ            max(512 tensor, 49152 / 128 = 384 SRAM)                                   =  512
    #   dP_ijᵀ ∥ exp     max(512 tensor, 1024 MUFU, 2·128·128 / 128 = 256 FMA, 81920 / 128 = 640)   = 1024
    #   dS_ijᵀ           max(256 FMA, 16384 / 128 = 128)                                           =  256
    #   dV_j, dK_j, dQ_i max(1536 tensor, 163840 / 128 = 1280)                                     = 1536
    #   τ dQ_i → SRAM    max((128 + 128) · 64 / 128 = 128 FMA, 32768 / 128 = 256)                  =  256
    # in series 3584 clocks; SRAM's whole traffic (phases + TMA: 3208 wavefronts) fits inside them
    launch = launch_of(SEVEN, 64)
    block = Block(10 * 128 * 128 * 64, 128 * 128, 81920, lambda: iter(()), tiles=1)
    hw = replace(H100, launch_seconds=0.0)  # the launch's 4 µs would outlast one tile pair
    t = kernel_time([block], launch, hw, dram_bytes=0, l2_bytes=0)
    clock = hw.clock_hz
    assert t.compute == pytest.approx(3584 / clock) and t.seconds == pytest.approx(3584 / clock)
    assert t.terms["SRAM → registers"] == pytest.approx((49152 + 81920 + 16384 + 163840 + 32768 + 66560) / 128 / clock)
    assert t.terms["tensor"] == pytest.approx(2560 / clock) and t.terms["MUFU (exp)"] == pytest.approx(1024 / clock)
    assert t.in_series and t.bound == "SRAM → registers"  # 3208 clocks busy against the tensor pipe's 2560


def test_tma_traffic_bounds_the_step_only_when_sram_is_slower_than_the_phases():
    # two phases of 1000 clocks each (a matmul share, then exponentials) and SRAM bytes: 64000 B in phase 1
    # (500 clocks), 0 in phase 2. TMA bytes beside them: 128000 B (1000 clocks): SRAM's whole 1500 < 2000, so the
    # step is 2000; with 320000 B (2500 clocks) SRAM's 3000 clocks outlast the phases and set the step
    phases = (Phase("matmul", tensor=1.0, smem=64000), Phase("exp", exps=1.0))
    block = Block(1000 * 4096, 1000 * 16, 0, lambda: iter(()), tiles=1)
    clock = H100.clock_hz
    for tma, clocks in ((128000, 2000), (320000, 3000)):
        launch = Launch(384, 1000, 168, "wgmma", phases=phases, smem_async=tma)
        assert kernel_time([block], launch, H100, 0, 0).compute == pytest.approx(clocks / clock)


def test_bound_in_series_is_the_busiest_unit_with_l2_reads_or_adds():
    # phases of 1000 clocks (a matmul) and 900 (exponentials): 1900 in series. L2's reads at 1500 clocks' worth of
    # bytes, dQ's additions at 1800: L2 is busy for the longer, 1800 clocks, busier than the tensor pipe (1000) but
    # not slower than the SMs: the time is the SMs' 1900 clocks, the bound L2 (no launch cost, to see the clocks)
    hw = replace(H100, l2_reduce_bandwidth=1e12, launch_seconds=0.0)
    clock = hw.clock_hz
    phases = (Phase("matmul", tensor=1.0), Phase("exp", exps=1.0))
    launch = Launch(384, 1000, 168, "wgmma", dq_bulk=True, phases=phases)
    block = Block(1000 * 4096, 900 * 16, 0, lambda: iter(()), tiles=1, atomics=round(1800 / clock * 1e12))
    reads = 1500 / clock * hw.l2_bandwidth
    t = kernel_time([block], launch, hw, 0, reads)
    assert t.units["L2"] == pytest.approx(1800 / clock) and t.bound == "L2"
    assert t.seconds == pytest.approx(1900 / clock)
    # without phases the same work is tensor + max(MUFU, FMA), also 1900 clocks, and the bound the larger pipe
    plain = kernel_time([block], replace(launch, phases=()), hw, 0, reads)
    assert not plain.in_series and plain.bound == "tensor" and plain.seconds == pytest.approx(1900 / clock)
