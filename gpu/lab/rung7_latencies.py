"""Backward rung 7's latencies, measured once per GPU (`python -m gpu.lab.calibrate` records them as "latencies"):
the numbers `sim.machine.warpgroups` plays rung 7's step with (`sim.machine.hardware.Hardware.wgmma_clocks`, …).
Each is the median over the SMs of clock64 cycles, every SM running the same microbenchmark at once:
  wgmma_clocks  SM clocks of each kind of commit group backward rung 7 issues (07_flash2_backward_wgmma.cu's
              issue_transposed, issue_key_grads, issue_dq, with its descriptors; sm_90a only), one thread block per
              SM: "latency", one warpgroup issuing a group and waiting for it (wgmma.wait_group 0), again and again,
              cycles per group from the first issue to the wait's return; "occupancy", two warpgroups keeping their
              groups in flight, cycles per group the SM's tensor pipe spends on it (the rate those shapes reach);
  turn_clocks SM clocks of one hand-off of rung 7's turns (its turn_pass, turn_wait: bar.arrive on the other
              warpgroup's named barrier, bar.sync on its own), two warpgroups passing the turn back and forth;
  stage_clocks  SM clocks of one stage of rung 7's producer (Q_i and dO_i by TMA, L_i and D_i by a bulk copy, on
              one mbarrier) from issue to the mbarrier's phase, every SM copying one stage at a time out of L2;
  reduce_clocks  (gpu.lab.calibrate, with its reduce-add microbenchmark) SM clocks of one warpgroup's TMA reduce-add
              of its (64, 64) float32 dQ tile from issue to the wait for its reads (as rung 7's thread waits before
              writing the tile again), every SM's two at once;
  fence_clocks  SM clocks a consumer warp waits in the fence (fence.proxy.async) after its stores to SRAM, per
              fenced store of a step ("d64 br128 dS_ij": dS_ij's stmatrix before dV_j, dK_j; "… τ dQ_i": τ dQ's
              stores before the reduce-add), from the last store's issue through the fence and the wgmma fence or
              warpgroup barrier behind it, while the other warpgroup's wgmma groups read SRAM (gpu.lab.rung7_fences;
              "alone": without them);
  branch_clocks  SM clocks one taken branch costs a warp in line 11's stream (its per-element `if (edge)`, which the
              kernel's SASS keeps as a branch over the mask and takes on every inner tile): two warps per scheduler
              running line 11 over 64 elements with those branches and without, the difference per branch
              (BRANCH_SOURCE; also recorded: "mask_pass_clocks", each version's clocks per pass);
  skeleton_clocks  SM clocks per step of rung 7's two consumer warpgroups stripped to their turns, wgmma groups and
              waits (no producer, no elementwise work: "bare"; with spins of the cycles the model gives that work:
              "spun"; with the kernel's own work: "work", "work, edge"): a check of `sim.machine.warpgroups`, not a
              figure the model uses;
"""

from gpu.lab.rung7_benchmarks import GROUPS_SOURCE
from gpu.lab.rung7_branches import branch_clocks

GROUP_SHAPES = {  # (d, Br) of the build -> the kind of commit group each kernel of GROUPS_SOURCE issues there
    (64, 128): {
        "groups_s": "ss m64n128k16 x4",
        "groups_grads": "rs m64n64k16 x16",
        "groups_dq": "ss-nmajor m64n64k16 x8",
    },
    (128, 64): {"groups_s": "ss m64n64k16 x8", "groups_grads": "rs m64n128k16 x8"},  # dQ's group: as at d = 64
}
GROUPS_SMEM = 1024 + 200 * 1024  # more than half an SM's: one thread block per SM


def groups_source(d: int, br: int) -> str:
    """GROUPS_SOURCE for head dim d and Br queries per step, fp16, with common.cuh and hopper.cuh inlined."""
    from gpu.source import INCLUDE, KERNEL_DIR

    return f"#define HEAD_DIM {d}\n#define BR {br}\n#define STORAGE 1\n" + INCLUDE.sub(
        lambda line: (KERNEL_DIR / line[1]).read_text(), GROUPS_SOURCE
    )


def latencies() -> dict:
    """Rung 7's wgmma groups and turns in SM clocks (module docstring), medians over the SMs; {} below sm_90a."""
    from gpu import device

    cupy = device.require()
    if device.capability() != "9.0":
        return {}
    sms, reps = device.properties()["sm_count"], 512
    clocks = cupy.zeros(2 * sms, cupy.int64)

    def cycles(fn, warpgroups: int, wait_each: int) -> float:
        clocks.fill(0)
        args = (cupy.int32(reps), cupy.int32(warpgroups), cupy.int32(wait_each), clocks)
        for _ in range(2):  # the first launch warms up; the second is read
            fn((sms,), (256,), args, shared_mem=GROUPS_SMEM)
        return float(cupy.median(clocks.reshape(sms, 2).max(axis=1)))

    groups, stages = {}, {}
    for (d, br), kernels in GROUP_SHAPES.items():
        mod = cupy.RawModule(code=groups_source(d, br), options=("--std=c++17", "-arch=sm_90a"))
        stages[f"d{d} br{br}"] = stage_clocks(mod, d, br)
        for name, shape in kernels.items():
            fn = mod.get_function(name)
            fn.max_dynamic_shared_size_bytes = GROUPS_SMEM
            groups[shape] = {"latency": cycles(fn, 1, 1) / reps, "occupancy": cycles(fn, 2, 0) / (2 * reps)}
    turns, rounds = mod.get_function("turns"), 4096
    clocks.fill(0)
    for _ in range(2):
        turns((sms,), (256,), (cupy.int32(rounds), clocks))
    return {
        **branch_clocks(),
        "skeleton_clocks": skeleton_clocks(),
        "wgmma_clocks": groups,
        "turn_clocks": float(cupy.median(clocks[:sms])) / (2 * rounds + 1),
        "stage_clocks": stages,
    }


SKELETON_SPINS = {(64, 128): (512, 128, 128, 128), (128, 64): (256, 64, 64, 128)}  # exps, dS, its stores, τ dQ's


def skeleton_clocks() -> dict:
    """SM clocks per step of GROUPS_SOURCE's skeleton at each (d, Br): "bare" (no spins) and "spun" (SKELETON_SPINS:
    the cycles the model gives those operations at the H100 preset's rates); with the kernel's own work in their
    place (skeleton_work): "work" (an inner tile) and "work, edge" (the mask's branches taken); the median over
    the SMs."""
    from gpu import device

    cupy = device.require()
    sms, steps = device.properties()["sm_count"], 256
    clocks = cupy.zeros(2 * sms, cupy.int64)
    out = {}
    for (d, br), spins in SKELETON_SPINS.items():
        mod = cupy.RawModule(code=groups_source(d, br), options=("--std=c++17", "-arch=sm_90a"))
        fn, work = mod.get_function("skeleton"), mod.get_function("skeleton_work")
        fn.max_dynamic_shared_size_bytes = work.max_dynamic_shared_size_bytes = GROUPS_SMEM
        runs = [(f"{name}", fn, (*map(cupy.int32, spun),)) for name, spun in (("bare", (0, 0, 0, 0)), ("spun", spins))]
        runs += [("work", work, (cupy.int32(0),)), ("work, edge", work, (cupy.int32(1),))]
        for name, kernel, args in runs:
            for _ in range(2):
                kernel((sms,), (256,), (cupy.int32(steps), *args, clocks), shared_mem=GROUPS_SMEM)
            out[f"d{d} br{br} {name}"] = float(cupy.median(clocks.reshape(sms, 2).max(axis=1))) / steps
    return out


def stage_clocks(mod, d: int, br: int) -> float:
    """SM clocks per copy of one stage of rung 7 (Q_i, dO_i, L_i, D_i: GROUPS_SOURCE's stage_loads), every SM
    copying one stage at a time from 16 planes of N = 2048 resident in L2; the median over the SMs."""
    from gpu import device, tma

    cupy = device.require()
    sms, n, planes, reps = device.properties()["sm_count"], 2048, 16, 64
    q = cupy.ones((1, planes, n, d), cupy.float16)
    do = cupy.ones((1, planes, n, d), cupy.float16)
    ld = cupy.zeros((planes, n // br, 2, br), cupy.float32)
    clocks = cupy.zeros(sms, cupy.int64)
    fn = mod.get_function("stage_loads")
    smem = 1024 + 2 * br * d * 2 + 2 * br * 4 + 8
    fn.max_dynamic_shared_size_bytes = smem
    args = (
        tma.rows_map(q, br),
        tma.rows_map(do, br),
        ld,
        cupy.int32(n // br),
        cupy.int32(planes),
        cupy.int32(reps),
        clocks,
    )
    for _ in range(2):
        fn((sms,), (32,), args, shared_mem=smem)
    return float(cupy.median(clocks)) / reps
