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
from sim.machine.prediction import predict
from tests.test_kernels_compile import NVCC

SEVEN = registry.rung(7)
H100 = hardware.get("H100-SXM")


def test_shared_memory_per_tile_pair_by_hand():
    # per consumer warp (8 of them) and Q block step, wavefronts of 128 bytes:
    # d = 128, Br = 64, dQ split by columns (64 each): L/D 16 + 8, dS 32, dQ 2 · 64 / 8 stores × 2 = 32  → 88
    assert launch_of(SEVEN, 128).smem_per_tile == 8 * 88 * 128
    # d = 64, Br = 128, dQ split by rows (64 columns each): L/D 32 + 16, dS 64, dQ 32 → 144
    assert launch_of(SEVEN, 64).smem_per_tile == 8 * 144 * 128
    # d = 128, Br = 64, not split: each warpgroup's two 64-column products over its own keys: dQ 2 × 32
    unsplit = launch_of(SEVEN, 128, backward_warpgroup_tiles(stages=2))
    assert unsplit.smem_per_tile == 8 * (16 + 8 + 32 + 64) * 128


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
    assert ptx == {"ld.shared.f32": br // 4, "ld.shared.v2.f32": br // 8, "st.shared.u16": br // 2,
                   "st.shared.v2.f32": dq_stores}  # fmt: skip
    per_warp = br // 4 + br // 8 + br // 2 + 2 * dq_stores  # the two-float stores: two wavefronts each
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
    assert fast.kernels[1].time.bound == "tensor"


@pytest.mark.parametrize("d", [64, 128])
def test_dq_bytes_added_are_what_ncu_counted_in_run_32(d):
    # 16k tokens at N = 4096: 4 × (2048 / d) heads; every one of the 32 K/V blocks adds τ dS_ij K_j into all of dQ
    # once (SPLIT_DQ at both d): 32 × 4096 × d × 4 bytes a head = 2³² bytes in all, at both d. ncu counted
    # 201,326,592 L2 reduction sectors at both d (gpu/NOTES.md run 32): 1.5 × 2³² / 32, the counter's 1.5 of run 33
    heads = 4 * 2048 // d
    tiles = SEVEN.default_tiles(d)
    p = predict("flash2", 4096, 4096, d, 2, tiles.block_rows, 128, False, heads, H100, launch_of(SEVEN, d), True)
    assert sum(k.traffic.reduced for k in p.kernels) == 32 * 4096 * d * 4 * heads == 2**32
