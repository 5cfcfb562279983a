"""Rung 7 in the machine model: the shared-memory work its warps do beside wgmma, by hand and against the kernel's
PTX (the instruction counts the model's formula rests on), and its time terms."""

import re
import subprocess
from collections import Counter
from dataclasses import replace

import pytest

from gpu import registry, source
from gpu.lab.predict import WAVEFRONT, launch_of
from gpu.lab.rung7_instructions import COUNTS
from gpu.tiling import backward_warpgroup_tiles
from sim.machine import hardware
from sim.machine.grids import Block
from sim.machine.hardware import Hardware
from sim.machine.launch import Launch, Phase
from sim.machine.prediction import predict
from sim.machine.timing import kernel_time
from sim.machine.warpgroups import Latencies, Op, Program, step_seconds
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
    # L_i's loads (ld.shared.f32) appear in each of line 11's two bodies, masked and not; a tile pair runs one
    assert ptx == {"ld.shared.f32": 2 * (br // 4), "ld.shared.v2.f32": br // 8, "st.shared.v2.f32": dq_stores,
                   "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16": br // 16}  # fmt: skip
    per_warp = br // 4 + br // 8 + br // 16 * 4 + 2 * dq_stores  # stmatrix.x4: 4 wavefronts; two-float stores: 2
    assert launch_of(SEVEN, d, tiles).smem_per_tile == 8 * per_warp * WAVEFRONT


def test_reduce_adds_bound_only_when_slower_than_the_sms():
    # d = 128, N = 4096, 1 × 16 heads, rung 7's launch: dQ's reduce-adds carry τ dS_ij K_j for every tile pair,
    # Br · d · 4 bytes each: 32 K/V blocks × 64 Q blocks × 64 · 128 · 4 bytes per head
    launch = launch_of(SEVEN, 128)
    added = 16 * 32 * 64 * 64 * 128 * 4
    # L2 as one rate (a part whose L2 parts were never measured): the additions' rate is L2's busy time
    rated = replace(H100, l2_reduce_bandwidth=added / 1.0, l2_parts={})  # they take one second
    slow = predict("flash2", 4096, 4096, 128, 2, 64, 128, False, 16, rated, launch, backward=True)
    main = slow.kernels[1].time
    assert main.terms["dQ reduce-adds"] == pytest.approx(1.0)  # one second at that rate
    assert main.bound == "dQ reduce-adds" and main.seconds == pytest.approx(1.0 + H100.launch_seconds)
    # with L2's parts, its busy time is theirs (the additions at the loops' cost on each part): the rate still sets
    # the time, but the busiest unit is the SMs' shared memory (below)
    parts = predict("flash2", 4096, 4096, 128, 2, 64, 128, False, 16, replace(rated, l2_parts=H100.l2_parts), launch,
                    backward=True).kernels[1].time  # fmt: skip
    assert parts.seconds == pytest.approx(1.0 + H100.launch_seconds) and parts.bound == "SRAM → registers"
    fast = predict("flash2", 4096, 4096, 128, 2, 64, 128, False, 16, H100, launch, backward=True)
    assert "dQ reduce-adds" not in fast.terms()  # no rate in the datasheet preset: left out
    # the SMs set the time, its warpgroups' step: the bound is the busiest unit, shared memory (3140 wavefronts of
    # 128 bytes per tile pair, test_step_operations_by_hand, against the tensor pipe's 2560 clocks)
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


KINDS = ["full", "turn_wait", "work", "issue", "work", "issue", "turn_pass", "wait", "work", "wait", "work", "reduce_wait",
         "turn_wait", "work", "issue", "work", "issue", "turn_pass", "wait", "empty", "work", "reduce", "work"]  # fmt: skip


def test_step_operations_by_hand():
    # one consumer warpgroup's step, as 07_flash2_backward_wgmma.cu orders it: stage, turn A (S_ijᵀ, dP_ijᵀ, each
    # after its descriptors and wgmma instructions), the exponentials after S_ijᵀ, dS_ijᵀ after dP_ijᵀ, the last
    # reduce-add's read, turn B (dS_ij stored, dV_j and dK_j and dQ of the block before issued back to back, the turn
    # passed, one wait for the three (run 37-bwd3), the stage handed back, τ dQ stored, reduce-added), the loop's
    # bookkeeping; warpgroup 1 passes the turn first
    launch = launch_of(SEVEN, 128)
    program = launch.program
    assert program.first == ((), (Op("turn_pass"),)) and program.step[0] == program.step[1]
    ops = program.step[0]
    assert [op.kind for op in ops] == KINDS and program.stage == "d128 br64"
    # each Work's instructions per warp, the kernel's SASS as gpu.lab.rung7_instructions counts it (d = 128): S_ijᵀ's
    # and dP_ijᵀ's issue, exp, dS_ijᵀ, dS_ij stored with dV_j, dK_j's issue, dQ's issue, τ dQ stored, the loop
    c = COUNTS[(128, 64)]
    assert [op.instructions for op in ops if op.kind == "work"] == [c["S_ijᵀ"], c["dP_ijᵀ"], c["exp"], c["dS_ijᵀ"],
                                                                   c["dV_j, dK_j"], c["dQ_i"], c["τ dQ_i → SRAM"],
                                                                   c["loop"]]  # fmt: skip
    # the exponentials' Work takes one branch on an inner tile (the jump over line 11's masked body), none elsewhere
    assert [op.branches for op in ops if op.kind == "work"] == [0, 0, 1, 0, 0, 0, 0, 0]
    # another tiling than the default has no count: its Works run at the units' rates
    other = launch_of(SEVEN, 128, backward_warpgroup_tiles(stages=3, split_dq=True)).program.step[0]
    assert all(op.instructions == 0 and op.branches == 0 for op in other)
    # the groups as calibrate names them: d / 16 of m64n{Br}k16 from SRAM; 2 · Br / 16 of m64n{d}k16 with A from
    # registers; Bc / 16 of m64n64k16 with B N-major
    assert [op.group for op in ops if op.kind == "issue"] == ["ss m64n64k16 x8"] * 2 + ["rs m64n128k16 x8",
                                                                                     "ss-nmajor m64n64k16 x8"]  # fmt: skip
    # SRAM bytes per tile pair, one warpgroup (fp16), d = 128, Br = 64, dQ split by columns:
    #   S_ijᵀ, dP_ijᵀ: A = its 64 rows of K_j (V_j), 64 × 128 × 2 = 16384; B = Q_i (dO_i) 64 × 128 × 2 = 16384
    #   exponentials: L_i, 4 warps × 16 wavefronts × 128 B = 8192; dS_ijᵀ: D_i 4 × 8 × 128 = 4096
    #   dS_ij stored: stmatrix.x4.trans, Br / 4 wavefronts a warp: 4 × 16 × 128 = 8192
    #   dV_j, dK_j: B = dO_i, Q_i, 2 × 64 × 128 × 2 = 32768; dQ: A = dS_ij 64 × 128 keys × 2 + B = K_j 128 × 64 × 2
    #   τ dQ_i stored: 4 warps × 32 wavefronts × 128 = 16384
    assert [op.phase.smem for op in ops if op.phase.smem] == [32768, 32768, 8192, 4096, 8192, 32768, 32768, 16384]
    # both warpgroups: wgmma's operand reads (4 matmuls' 65536) plus the warps' loads and stores (the PTX's count)
    assert sum(p.smem for p in program.phases()) == 4 * 65536 + launch.smem_per_tile
    assert launch.smem_async == 2 * 16384 + 512 + 2 * 64 * 64 * 4  # TMA: Q_i, dO_i, L_i, D_i in; dQ's tiles out
    # d = 64, Br = 128, dQ split by rows: S_ijᵀ 64 × 64 × 2 + 128 × 64 × 2 = 24576; L_i 4 × 32 × 128; D_i
    # 4 × 16 × 128; dS_ij 4 × 32 × 128; B of dV_j, dK_j 2 × 128 × 64 × 2; dQ 64 × 128 × 2 + 128 × 64 × 2; τ dQ_i
    # 4 × 32 × 128
    launch = launch_of(SEVEN, 64)
    ops = launch.program.step[0]
    assert [op.phase.smem for op in ops if op.phase.smem] == [24576, 24576, 16384, 8192, 16384, 32768, 32768, 16384]
    assert sum(p.smem for p in launch.program.phases()) == 4 * 24576 + 2 * 32768 + 2 * 32768 + launch.smem_per_tile
    # five equal matmuls, each warpgroup half of each: S, dP, dV + dK, dQ; all the exponentials in its one Work
    assert [op.phase.tensor for op in ops if op.kind == "issue"] == [0.1, 0.1, 0.2, 0.1]
    assert [op.phase.exps for op in ops if op.phase.exps] == [0.5]
    assert [op.group for op in ops if op.kind == "issue"] == ["ss m64n128k16 x4"] * 2 + ["rs m64n64k16 x16",
                                                                                     "ss-nmajor m64n64k16 x8"]  # fmt: skip


def test_without_latencies_the_step_is_the_busiest_unit():
    # one tile pair of rung 7 at d = 64 (Br = Bc = 128) on the H100 preset, per clock: tensor 4096 FLOPs, MUFU 16,
    # FMA 128, SRAM 128 bytes. Work: 10 · 128 · 128 · 64 FLOPs = 2560 clocks, 128 · 128 exponentials = 1024 clocks,
    # 4 · 128 · 128 + 128 · 64 + 128 · 64 = 81920 other operations = 640 clocks; SRAM (wgmma's reads, the warps',
    # the TMA's: test_step_operations_by_hand) 2 · (2 · 24576 + 16384 + 8192 + 16384 + 2 · 32768 + 16384)
    # + 32768 + 1024 + 32768 = 410624 bytes = 3208 clocks. With no latency measured, each group's latency is its
    # time at the rates and the turns, copies and reduce-adds cost nothing: the warpgroups' critical path is
    # shorter than the SRAM's 3208 clocks (the tensor pipe alone is busy 2560), so SRAM sets the step
    launch = launch_of(SEVEN, 64)
    block = Block(10 * 128 * 128 * 64, 128 * 128, 81920, lambda: iter(()), tiles=1)
    unmeasured = dict.fromkeys(("turn_clocks", "reduce_clocks", "branch_clocks"), 0.0)
    unmeasured |= {"wgmma_clocks": {}, "stage_clocks": {}, "block_clocks": {}}
    hw = replace(H100, launch_seconds=0.0, **unmeasured)
    t = kernel_time([block], launch, hw, dram_bytes=0, l2_bytes=0)
    clock = hw.clock_hz
    assert t.terms["SRAM → registers"] == pytest.approx(410624 / 128 / clock)
    assert t.compute == pytest.approx(3208 / clock) and t.seconds == pytest.approx(3208 / clock)
    assert t.terms["tensor"] == pytest.approx(2560 / clock) and t.terms["MUFU (exp)"] == pytest.approx(1024 / clock)
    assert t.in_series and t.bound == "SRAM → registers"


def test_with_the_h100_latencies_the_step_is_the_critical_path():
    # the same tile pair with the preset's latencies (the calibration's): the warpgroups' step outlasts every unit,
    # and it is the critical path sim.machine.warpgroups plays (its own tests work that by hand); the bound stays
    # the busiest unit
    launch = launch_of(SEVEN, 64)
    block = Block(10 * 128 * 128 * 64, 128 * 128, 81920, lambda: iter(()), tiles=1)
    hw = replace(H100, launch_seconds=0.0)
    t = kernel_time([block], launch, hw, dram_bytes=0, l2_bytes=0)
    clock = hw.clock_hz
    groups = {g: ((o / clock, lat / clock)) for g, (lat, o) in H100.wgmma_clocks.items()}
    lat = Latencies(tuple((g, o, la) for g, (o, la) in groups.items()), turn=H100.turn_clocks / clock,
                    copy=H100.stage_clocks["d64 br128"] / clock, reduce=H100.reduce_clocks / clock)  # fmt: skip
    # each Work's demand on each unit alone, one warpgroup's half of the tile pair (test_step_operations_by_hand's
    # bytes), in clocks: exponentials 512 on the MUFU, τS − L 128 on the FMA pipes, L_i 128 on SRAM; dP − D and P ∘
    # 128, D_i 64; dS_ij's stores 128; τ · dQ_i, τ · dK_j 64, their stores 128
    units = {
        "exp": {"MUFU (exp)": 128 * 128 / 2 / 16, "FMA": 2 * 128 * 128 / 2 / 128, "SRAM → registers": 16384 / 128},
        "dS_ijᵀ": {"FMA": 2 * 128 * 128 / 2 / 128, "SRAM → registers": 8192 / 128},
        "dS_ij → SRAM": {"SRAM → registers": 16384 / 128},
        "τ dQ_i → SRAM": {"FMA": (128 + 128) * 64 / 2 / 128, "SRAM → registers": 16384 / 128},
        "nothing": {},
    }
    # and on the issue slots its warps' instructions at one a clock (gpu.lab.rung7_instructions.COUNTS, d = 64: the
    # groups' issue 82, 45, 163 with dS_ij's stmatrix, 128; exp 153, dS_ijᵀ 218, τ dQ 79, the loop 63); then, its
    # own, the exponentials' one branch at the preset's branch_clocks, and the fences after dS_ij's stores (241) and
    # τ dQ's (333), the preset's fence_clocks at d = 64

    def timed(ops):
        out = []
        for op in ops:
            if op.kind == "work":
                asks = units[op.phase.name] | {"issue slots": op.instructions}
                fence = H100.fence_clocks[f"d64 br128 {op.fence}"] if op.fence else 0.0
                op = replace(op, demand=tuple((u, c / clock) for u, c in asks.items() if c),
                             work=(op.branches * H100.branch_clocks + fence) / clock)  # fmt: skip
            out.append(op)
        return tuple(out)

    assert [op.fence for op in launch.program.step[0] if op.fence] == ["dS_ij", "τ dQ_i"]
    step = step_seconds(tuple(map(timed, launch.program.first)), tuple(map(timed, launch.program.step)), lat)
    # the block makes one step, so it also costs its own clocks beside it (timing's "block": the preset's
    # block_clocks at d = 64, 12,237, measured by gpu.lab.rung7_blocks)
    assert t.compute == pytest.approx(step + 12237 / clock) and step > 3208 / clock
    # the instructions, branches and fences lengthen the step: without them (the units' rates alone) it is shorter
    assert [op.branches for op in launch.program.step[0] if op.branches] == [1]
    bare = tuple(tuple(replace(op, instructions=0, branches=0, fence="") for op in ops) for ops in launch.program.step)
    rates = step_seconds(tuple(map(timed, launch.program.first)), tuple(map(timed, bare)), lat)
    assert rates < step
    assert t.bound == "SRAM → registers"


def test_bound_in_series_is_the_busiest_unit_with_l2_reads_or_adds():
    # one warpgroup: a matmul (1000 clocks at the tensor rate, no latency measured: it completes as it ends), then
    # exponentials (900): 1900 a step. L2's reads at 1500 clocks' worth of bytes, dQ's additions at 1800: L2 is
    # busy for the longer, 1800 clocks, busier than the tensor pipe (1000) but not slower than the SMs: the time is
    # the SMs' 1900 clocks, the bound L2 (no launch cost, to see the clocks)
    hw = replace(H100, l2_reduce_bandwidth=1e12, launch_seconds=0.0)
    clock = hw.clock_hz
    step = (
        Op("issue", "matmul", phase=Phase("matmul", tensor=1.0)),
        Op("wait"),
        Op("work", phase=Phase("exp", exps=1.0)),
    )
    launch = Launch(384, 1000, 168, "wgmma", dq_bulk=True, program=Program(first=((),), step=(step,)))
    block = Block(1000 * 4096, 900 * 16, 0, lambda: iter(()), tiles=1, atomics=round(1800 / clock * 1e12))
    reads = 1500 / clock * hw.l2_bandwidth
    t = kernel_time([block], launch, hw, 0, reads)
    assert t.units["L2"] == pytest.approx(1800 / clock) and t.bound == "L2"
    assert t.seconds == pytest.approx(1900 / clock)
    # without a program the same work is tensor + max(MUFU, FMA), also 1900 clocks, and the bound again the busiest
    # unit, L2 (run 40-model9: before, the larger pipe, tensor, though L2 was busier)
    plain = kernel_time([block], replace(launch, program=None), hw, 0, reads)
    assert not plain.in_series and plain.bound == "L2" and plain.seconds == pytest.approx(1900 / clock)


def test_a_works_time_is_its_rates_or_its_instructions_and_its_branches():
    # one warpgroup, one Work: 900 clocks of exponentials at the MUFU rate (900 · 16 of them), 400 instructions and
    # 10 branches taken at 15 clocks each. Its time: max(900, 400) + 10 · 15 = 1050 clocks; with 1200 instructions
    # max(900, 1200) + 150 = 1350; with branch_clocks 0 (not measured) 900
    hw = replace(H100, launch_seconds=0.0, branch_clocks=15.0)
    clock = hw.clock_hz
    block = Block(0, 900 * 16, 0, lambda: iter(()), tiles=1)

    def step(instructions: int, on: Hardware) -> float:
        ops = (Op("work", instructions=instructions, branches=10, phase=Phase("exp", exps=1.0)),)
        launch = Launch(384, 1000, 168, "wgmma", program=Program(first=((),), step=(ops,)))
        return kernel_time([block], launch, on, 0, 0).compute * clock

    assert step(400, hw) == pytest.approx(1050) and step(1200, hw) == pytest.approx(1350)
    assert step(400, replace(hw, branch_clocks=0.0)) == pytest.approx(900)


def test_a_fence_after_a_works_stores_adds_its_measured_wait():
    # one warpgroup, one Work: 900 clocks of exponentials, 400 instructions, its stores fenced ("τ dQ_i") in a program
    # whose stage is "d64 br128": max(900, 400) + the preset's 333 clocks for that fence = 1233; a fence not measured
    # (fence_clocks without the key) costs nothing: 900
    hw = replace(H100, launch_seconds=0.0, block_clocks={})  # the step alone (the block's own cost: the next test)
    clock = hw.clock_hz
    block = Block(0, 900 * 16, 0, lambda: iter(()), tiles=1)

    def step(on: Hardware) -> float:
        ops = (Op("work", instructions=400, fence="τ dQ_i", phase=Phase("exp", exps=1.0)),)
        launch = Launch(384, 1000, 168, "wgmma", program=Program(first=((),), step=(ops,), stage="d64 br128"))
        return kernel_time([block], launch, on, 0, 0).compute * clock

    assert H100.fence_clocks["d64 br128 τ dQ_i"] == 333
    assert step(hw) == pytest.approx(1233) and step(replace(hw, fence_clocks={})) == pytest.approx(900)


def test_a_block_that_makes_steps_costs_its_own_clocks_beside_them():
    # the same one-Work program (stage "d64 br128": its step 900 clocks of exponentials, 400 instructions, τ dQ's
    # fence 333 → 1233), one block per SM: a block of one step costs 1233 + the stage's block_clocks (5000 here) =
    # 6233 clocks; a block of no step (tiles = 0, no work) none of it: 0; a stage with no block_clocks entry
    # ("d128 br64" missing) its step alone: 1233
    hw = replace(H100, launch_seconds=0.0, block_clocks={"d64 br128": 5000})
    clock = hw.clock_hz
    ops = (Op("work", instructions=400, fence="τ dQ_i", phase=Phase("exp", exps=1.0)),)

    def compute(block: Block, stage: str, on: Hardware = hw) -> float:
        launch = Launch(384, 1000, 168, "wgmma", program=Program(first=((),), step=(ops,), stage=stage))
        return kernel_time([block], launch, on, 0, 0).compute * clock

    stepping = Block(0, 900 * 16, 0, lambda: iter(()), tiles=1)
    fences = {**H100.fence_clocks, "d128 br64 τ dQ_i": 333}
    assert compute(stepping, "d64 br128") == pytest.approx(6233)
    assert compute(Block(0, 0, 0, lambda: iter(())), "d64 br128") == 0
    assert compute(stepping, "d128 br64", replace(hw, fence_clocks=fences)) == pytest.approx(1233)
