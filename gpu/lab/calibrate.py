"""Calibrate the machine model's rates on this GPU: `python -m gpu.lab.calibrate OUT.json`.

Each rate is the median of CUDA-event timings of one small kernel that does nothing else:
  dram_read   bytes/s reading a 2 GiB buffer once (16-byte loads), far larger than L2;
  l2_read     bytes/s reading a 16 MiB buffer 64 times (it stays in L2; loads that bypass L1);
  exp2        ex2.approx.f32 per second per SM (the MUFU), 8 independent chains per thread;
  fma         fp32 FMAs per second per SM (the FMA pipes), 8 independent chains per thread;
  tensor      fp16 FLOP/s of cuBLAS on 8192³ (wgmma on Hopper): the tensor rate a kernel can reach;
  launch      seconds per launch of an empty kernel, launched back to back;
  l2_atomic   bytes/s of float32 additions L2 absorbs: red.global.add.v2.f32 into a 16 MiB buffer (it stays in
              L2) 16 times, each warp's lanes on 8 rows × 32 bytes as rung 5 adds dQ_i;
  l2_bulk_reduce  bytes/s of float32 additions by TMA reduce-adds (cp.reduce.async.bulk.tensor, sm_90a only: 0
              elsewhere) into the same 16 MiB, 16 times, as rung 7 adds dQ_i: one thread per warpgroup adds its
              (64, 64) float32 SRAM tile in two (64, 32) boxes of 128-byte swizzled rows, through rung 7's own
              tensor map (gpu.tma.accumulator_map), every SM's two warpgroups at once;
  wgmma_clocks  SM clocks of each kind of commit group backward rung 7 issues (07_flash2_backward_wgmma.cu's
              issue_transposed, issue_key_grads, issue_dq, with its descriptors; sm_90a only), one thread block per
              SM: "latency", one warpgroup issuing a group and waiting for it (wgmma.wait_group 0), again and again,
              cycles per group from the first issue to the wait's return; "occupancy", two warpgroups keeping their
              groups in flight, cycles per group the SM's tensor pipe spends on it (the rate those shapes reach);
  turn_clocks SM clocks of one hand-off of rung 7's turns (its turn_pass, turn_wait: bar.arrive on the other
              warpgroup's named barrier, bar.sync on its own), two warpgroups passing the turn back and forth;
  stage_clocks  SM clocks of one stage of rung 7's producer (Q_i and dO_i by TMA, L_i and D_i by a bulk copy, on
              one mbarrier) from issue to the mbarrier's phase, every SM copying one stage at a time out of L2;
  reduce_clocks  SM clocks of one warpgroup's TMA reduce-add of its (64, 64) float32 dQ tile from issue to the wait
              for its reads (as rung 7's thread waits before writing the tile again), every SM's two at once;
  skeleton_clocks  SM clocks per step of rung 7's two consumer warpgroups stripped to their turns, wgmma groups and
              waits (no producer, no elementwise work: "bare"; with spins of the cycles the model gives that work:
              "spun"): a check of `sim.machine.warpgroups`, not a figure the model uses;
  host        seconds of host work per public call (`host_seconds`, "forward 6", "backward 7", …): the call timed
              back to back on a shape whose kernels take a few µs (1 × 1 heads, N = 128, d = 64, fp16), so the
              host's checks, allocations and launches set the pace.
`sim.machine.hardware.calibrated(preset, recording)` applies the rates to a preset; `sim.machine.timing.per_call`
the host work to a predicted call.
"""

import json
import sys
from pathlib import Path

SOURCE = r"""
extern "C" __global__ void stream(const int4* __restrict__ x, long long n, int reps, int* out) {
    int acc = 0;
    for (int r = 0; r < reps; ++r)  // each pass shifted by one block, so that no SM re-reads its own lines from L1
        for (long long i = ((blockIdx.x + r) % gridDim.x) * (long long)blockDim.x + threadIdx.x; i < n;
             i += (long long)gridDim.x * blockDim.x) {
            int4 v = __ldcg(x + i);  // cached in L2 only
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    if (acc == 0x7fffffff) out[0] = acc;  // never true for the data used: keeps the loads
}
extern "C" __global__ void exps(float seed, int iters, float* out) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = seed * (threadIdx.x + k) * 1e-9f;
    for (int i = 0; i < iters; ++i)
        for (int k = 0; k < 8; ++k) asm volatile("ex2.approx.f32 %0, %0;" : "+f"(a[k]));
    float s = 0.f;
    for (int k = 0; k < 8; ++k) s += a[k];
    if (s == 12345.f) out[0] = s;
}
extern "C" __global__ void fmas(float seed, int iters, float* out) {
    float a[8];
    for (int k = 0; k < 8; ++k) a[k] = seed * (threadIdx.x + k);
    for (int i = 0; i < iters; ++i)
        for (int k = 0; k < 8; ++k) a[k] = fmaf(a[k], 0.999999f, 1e-7f);
    float s = 0.f;
    for (int k = 0; k < 8; ++k) s += a[k];
    if (s == 12345.f) out[0] = s;
}
extern "C" __global__ void empty() {}
extern "C" __global__ void adds(float* acc, int rows, int reps) {
    // as add_dq does: lane (g, t) adds floats 2t, 2t + 1 of each 8-column piece of row g of its warp's 8 rows
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, warps = gridDim.x * blockDim.x / 32;
    for (int r = 0; r < reps; ++r)
        for (int w = warp; w < rows / 8; w += warps) {
            float* row = acc + (size_t)(8 * w + g) * 128 + 2 * t;
            for (int n = 0; n < 16; ++n) {
#if __CUDA_ARCH__ >= 900
                asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(row + 8 * n), "f"(1.f), "f"(1.f) : "memory");
#else
                atomicAdd(row + 8 * n, 1.f);
                atomicAdd(row + 8 * n + 1, 1.f);
#endif
            }
        }
}
"""
REDUCE_SOURCE = r"""
typedef unsigned int u32;
struct __align__(64) TensorMap { unsigned long long opaque[16]; };  // CUtensorMap, as in hopper.cuh
// as reduce_dq in 07_flash2_backward_wgmma.cu: each warpgroup's thread 0 adds its (64, 64) float32 tile from SRAM
// into the accumulator (planes, rows, 128), two (64, 32) boxes per tile, tiles taken in turn by every warpgroup
extern "C" __global__ void reduces(const __grid_constant__ TensorMap map, int planes, int rows, int reps, int in_flight,
                                   long long* clocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 base = ((u32)__cvta_generic_to_shared(smem) + 1023) & ~1023u, wg = threadIdx.x / 128;
    const u32 tile = base + wg * 64 * 64 * 4;
    for (int e = threadIdx.x % 128; e < 64 * 64; e += 128)
        asm volatile("st.shared.f32 [%0], %1;" ::"r"(tile + 4 * e), "f"(1.f) : "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x % 128 != 0) return;
    const int tiles = planes * (rows / 64) * 2, wgs = gridDim.x * (blockDim.x / 128);
    const long long start = clock64();
    int count = 0;
    for (int r = 0; r < reps; ++r)
        for (int w = blockIdx.x * (blockDim.x / 128) + wg; w < tiles; w += wgs) {
            const int half = w % 2, row = (w / 2) % (rows / 64) * 64, plane = w / 2 / (rows / 64);
            for (int b = 0; b < 2; ++b)
                asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.bulk_group [%0, {%2, %3, %4}], [%1];"
                             ::"l"((unsigned long long)&map), "r"(tile + b * 64 * 128), "r"(64 * half + 32 * b),
                             "r"(row), "r"(plane) : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            if (in_flight)
                asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory");  // a few tiles in flight, as SRAM allows
            else  // rung 7's thread waits for its tile to have been read before writing it again
                asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            ++count;
        }
    if (!in_flight) clocks[blockIdx.x * 2 + wg] = (clock64() - start) / max(count, 1);
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // every addition done before SRAM is released
}
"""
GROUPS_SOURCE = r"""
// the three kinds of wgmma commit group 07_flash2_backward_wgmma.cu issues, with its descriptors (its
// issue_transposed, issue_key_grads and issue_dq), timed by clock64 on each SM; and the warpgroups' turns
#define BC 128
#define TILE_Q (BR * HEAD_DIM * 2)
#define TILE_KV (BC * HEAD_DIM * 2)
#define TILE_DS (BR * 64 * 2)
#define NACC (HEAD_DIM / 2)
#define DQ_COLS (BR == 128 ? HEAD_DIM : HEAD_DIM / 2)  // SPLIT_DQ, the default at both d
#include "common.cuh"
#include "hopper.cuh"

// kind 0: S_ijᵀ = K_j Q_iᵀ (and dP_ijᵀ, the same shape): d / 16 of m64n{BR}k16, both operands from SRAM
__device__ __forceinline__ void group_s(float (&acc)[BR / 2], u32 a_rows, u32 b_rows, int more) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
        const u32 at = (kk % 4) * 32;
        wgmma_ss(acc, sw128_desc(a_rows + (kk / 4) * BC * 128 + at, 16), sw128_desc(b_rows + (kk / 4) * BR * 128 + at, 16), kk > 0 || more);
    }
    wgmma_commit();
}
// kind 1: dV_j += P_ijᵀ dO_i and dK_j += dS_ijᵀ Q_i, one group: 2 · BR / 16 of m64n{d}k16, A from registers
__device__ __forceinline__ void group_grads(float (&dv)[NACC], const u32 (&pf)[BR / 16][4], float (&dk)[NACC],
                                            const u32 (&dsf)[BR / 16][4], u32 do_tile, u32 q_tile) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) wgmma_rs(dv, pf[kk], sw128_desc(do_tile + kk * 2048, BR * 128));
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) wgmma_rs(dk, dsf[kk], sw128_desc(q_tile + kk * 2048, BR * 128));
    wgmma_commit();
}
// kind 2: dQ_i's product, dS_ij (SRAM) · K_j (SRAM, N-major): Bc / 16 of m64n{DQ_COLS}k16
__device__ __forceinline__ void group_dq(float (&dq)[DQ_COLS / 2], u32 ds_rows, u32 k_cols, int more) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk)
        wgmma_ss_nmajor(dq, sw128_desc(ds_rows + (kk / 4) * TILE_DS + (kk % 4) * 32, 16), sw128_desc(k_cols + kk * 2048, BC * 128), kk > 0 || more);
    wgmma_commit();
}

// `warpgroups` (1 or 2) warpgroups of each thread block issue `reps` groups of one kind one after another; with
// `wait_each` each waits for its group before issuing the next (the latency of one group, issue to wait), else
// all are in flight (the tensor pipe's time per group). clocks[2 · block + warpgroup]: its clock64 cycles.
#define GROUPS_KERNEL(NAME, DECLARE, ISSUE, KEEP)                                                                      \
    extern "C" __global__ void __launch_bounds__(256, 1) NAME(int reps, int warpgroups, int wait_each, long long* clocks) { \
        extern __shared__ __align__(1024) unsigned char smem[];                                                       \
        const u32 base = (smem_u32(smem) + 1023) & ~1023u;                                                            \
        for (u32 at = 4 * threadIdx.x; at < 2 * TILE_KV + 2 * TILE_Q + 2 * TILE_DS; at += 4 * blockDim.x)             \
            asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(base + at), "r"(0x2C002C00u) : "memory"); /* fp16 1/16 */    \
        fence_proxy_async();                                                                                          \
        __syncthreads();                                                                                              \
        const int c = threadIdx.x / 128;                                                                              \
        if (c >= warpgroups) return;                                                                                  \
        const u32 sK = base, sQ = sK + 2 * TILE_KV, sdO = sQ + TILE_Q, sdS = sdO + TILE_Q;                           \
        DECLARE;                                                                                                      \
        const long long start = clock64();                                                                            \
        for (int r = 0; r < reps; ++r) {                                                                              \
            ISSUE;                                                                                                    \
            if (wait_each) wgmma_wait<0>();                                                                           \
        }                                                                                                             \
        wgmma_wait<0>();                                                                                              \
        const long long stop = clock64();                                                                             \
        float sum = 0.f; /* every accumulator stays live: ptxas drops a wgmma whose results are unused */             \
        KEEP;                                                                                                         \
        if (threadIdx.x % 128 == 0) clocks[2 * blockIdx.x + c] = sum == 12345.f ? 0 : stop - start;                  \
    }

GROUPS_KERNEL(groups_s, float st[BR / 2], group_s(st, sK + c * 64 * 128, sQ, r > 0 && warpgroups > 0),
              for (int e = 0; e < BR / 2; ++e) sum += st[e])
GROUPS_KERNEL(groups_grads,
              float dv[NACC]; float dk[NACC]; u32 pf[BR / 16][4]; u32 dsf[BR / 16][4];
              for (int e = 0; e < NACC; ++e) dv[e] = dk[e] = 0.f;
              for (int kk = 0; kk < BR / 16; ++kk) for (int e = 0; e < 4; ++e) { /* distinct registers, as P_ijᵀ's and dS_ijᵀ's */ \
                  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(pf[kk][e]) : "r"(base + 16 * kk + 4 * e));     \
                  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(dsf[kk][e]) : "r"(base + 512 + 16 * kk + 4 * e)); },
              group_grads(dv, pf, dk, dsf, sdO, sQ),
              for (int e = 0; e < NACC; ++e) sum += dv[e] + dk[e])
GROUPS_KERNEL(groups_dq, float dq[DQ_COLS / 2], group_dq(dq, sdS + c * 64 * 128, sK, r > 0 && warpgroups > 0),
              for (int e = 0; e < DQ_COLS / 2; ++e) sum += dq[e])

// the warpgroups' turns as rung 7 takes them (its turn_wait, turn_pass: named barriers 4 and 5 of 256 threads):
// `reps` rounds of wait, pass in each warpgroup; clocks[block]: warpgroup 0's cycles, 2 · reps + 1 hand-offs
extern "C" __global__ void __launch_bounds__(256, 1) turns(int reps, long long* clocks) {
    const int c = threadIdx.x / 128;
    __syncthreads();
    const long long start = clock64();
    if (c == 1) asm volatile("bar.arrive 4, 256;\n" ::: "memory");
    for (int r = 0; r < reps; ++r) {
        asm volatile("bar.sync %0, 256;\n" ::"r"(4 + c) : "memory");
        asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - c) : "memory");
    }
    if (c == 0) asm volatile("bar.sync 4, 256;\n" ::: "memory");
    const long long stop = clock64();
    if (threadIdx.x == 0) clocks[blockIdx.x] = stop - start;
}

// one stage of rung 7's producer (Q_i and dO_i by TMA, PIECES boxes of (Br, 64) each, L_i·log2 e and D_i by one bulk
// copy, all on one mbarrier), copied again and again by one thread per SM, each copy waited for before the next, the
// Q blocks taken in turn over `planes` planes of `tr` blocks (resident in L2 after the first launch); every SM at
// once, as every K/V block's producer reads them. clocks[block]: cycles over `reps` copies
extern "C" __global__ void stage_loads(const __grid_constant__ TensorMap Q_map, const __grid_constant__ TensorMap dO_map,
                                       const float* __restrict__ LD, int tr, int planes, int reps, long long* clocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 sQ = (smem_u32(smem) + 1023) & ~1023u, sdO = sQ + TILE_Q, sLD = sdO + TILE_Q, full = sLD + 2 * BR * 4;
    if (threadIdx.x != 0) return;
    mbar_init(full, 1);
    mbar_init_fence();
    const long long start = clock64();
    for (int r = 0; r < reps; ++r) {
        const int item = blockIdx.x + r * gridDim.x, i = item % tr, plane = item / tr % planes;
        mbar_expect_tx(full, 2 * TILE_Q + 2 * BR * 4);
        for (int p = 0; p < HEAD_DIM / 64; ++p) {
            tma_load_3d(sQ + p * BR * 128, &Q_map, full, p * 64, i * BR, plane);
            tma_load_3d(sdO + p * BR * 128, &dO_map, full, p * 64, i * BR, plane);
        }
        bulk_load(sLD, LD + ((size_t)plane * tr + i) * 2 * BR, 2 * BR * 4, full);
        mbar_wait(full, r & 1);
    }
    clocks[blockIdx.x] = clock64() - start;
}

__device__ __forceinline__ void spin(int cycles) {  // a stand-in for `cycles` of a warpgroup's own work
    const long long until = clock64() + cycles;
    while (clock64() < until) {
    }
}

// rung 7's two consumer warpgroups without their producer, loads and elementwise work: each step the turns, the four
// kinds of group and the waits of 07_flash2_backward_wgmma.cu (turn A: S_ijᵀ, dP_ijᵀ; turn B: dV_j and dK_j, then
// dQ), with `spins` cycles of waiting where its exponentials, dS_ij, dS_ij's stores and τ dQ's stores stand. A check
// of sim.machine.warpgroups' step, not a rate the model uses. clocks[2 · block + warpgroup]: cycles over `steps`
extern "C" __global__ void __launch_bounds__(256, 1) skeleton(int steps, int exps, int ds, int stores, int dq_stores,
                                                              long long* clocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 base = (smem_u32(smem) + 1023) & ~1023u;
    for (u32 at = 4 * threadIdx.x; at < 2 * TILE_KV + 2 * TILE_Q + 2 * TILE_DS; at += 4 * blockDim.x)
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(base + at), "r"(0x2C002C00u) : "memory");
    fence_proxy_async();
    __syncthreads();
    const int c = threadIdx.x / 128;
    const u32 sK = base, sV = sK + TILE_KV, sQ = sV + TILE_KV, sdO = sQ + TILE_Q, sdS = sdO + TILE_Q;
    float dk[NACC], dv[NACC], dq[DQ_COLS / 2];
#pragma unroll
    for (int e = 0; e < NACC; ++e) dk[e] = dv[e] = 0.f;
    float sum = 0.f;
    const long long start = clock64();
    if (c == 1) asm volatile("bar.arrive 4, 256;\n" ::: "memory");
    for (int it = 0; it < steps; ++it) {
        float st[BR / 2], dpt[BR / 2];
        u32 pf[BR / 16][4], dsf[BR / 16][4];
        asm volatile("bar.sync %0, 256;\n" ::"r"(4 + c) : "memory");
        group_s(st, sK + c * 64 * 128, sQ, 0);
        group_s(dpt, sV + c * 64 * 128, sdO, 0);
        asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - c) : "memory");
        wgmma_wait<1>();
        keep(st);
        spin(exps);
        wgmma_wait<0>();
        keep(dpt);
        spin(ds);
#pragma unroll
        for (int kk = 0; kk < BR / 16; ++kk) {
            accumulators_to_a(pf[kk], st + 8 * kk, st + 8 * kk + 4);
            accumulators_to_a(dsf[kk], dpt + 8 * kk, dpt + 8 * kk + 4);
        }
        asm volatile("bar.sync %0, 256;\n" ::"r"(4 + c) : "memory");
        spin(stores);
        group_grads(dv, pf, dk, dsf, sdO, sQ);
        wgmma_wait<0>();
        keep(dv);
        keep(dk);
        keep(pf);
        keep(dsf);
        group_dq(dq, sdS + c * 64 * 128, sK, 0);
        asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - c) : "memory");
        wgmma_wait<0>();
        keep(dq);
        spin(dq_stores);
        sum += dq[0];
    }
    if (c == 0) asm volatile("bar.sync 4, 256;\n" ::: "memory");
    const long long stop = clock64();
#pragma unroll
    for (int e = 0; e < NACC; ++e) sum += dv[e] + dk[e];
    if (threadIdx.x % 128 == 0) clocks[2 * blockIdx.x + c] = sum == 12345.f ? 0 : stop - start;
}
"""
GROUP_SHAPES = {  # (d, Br) of the build -> the kind of commit group each kernel of GROUPS_SOURCE issues there
    (64, 128): {
        "groups_s": "ss m64n128k16 x4",
        "groups_grads": "rs m64n64k16 x16",
        "groups_dq": "ss-nmajor m64n64k16 x8",
    },
    (128, 64): {"groups_s": "ss m64n64k16 x8", "groups_grads": "rs m64n128k16 x8"},  # dQ's group: as at d = 64
}
GROUPS_SMEM = 1024 + 200 * 1024  # more than half an SM's: one thread block per SM
REDUCE_SMEM = 1024 + 2 * 64 * 64 * 4  # alignment for the swizzle, two warpgroups' (64, 64) float32 tiles
HOST_SHAPE = {"batch": 1, "heads": 1, "n": 128, "d": 64}  # kernels of a few µs: the host's work shows


def calibrate() -> dict:
    """Every rate of the module docstring, measured on the current device."""
    from gpu import device
    from gpu.lab import timing

    cupy = device.require()
    sms = device.properties()["sm_count"]
    mod = cupy.RawModule(code=SOURCE)
    stream, exps, fmas, empty, adds = (mod.get_function(n) for n in ("stream", "exps", "fmas", "empty", "adds"))
    out = cupy.zeros(1, cupy.int32)
    grid, block = (sms * 8,), (512,)

    def read_rate(nbytes: int, reps: int) -> float:
        x = cupy.ones(nbytes // 4, cupy.int32)
        n = nbytes // 16
        ms = timing.median_ms(lambda: stream(grid, block, (x, cupy.int64(n), cupy.int32(reps), out)))
        return nbytes * reps / (ms / 1e3)

    def per_sm(kernel, iters: int, per_iter: int) -> float:
        ms = timing.median_ms(lambda: kernel(grid, block, (cupy.float32(1.0), cupy.int32(iters), out)))
        return grid[0] * block[0] * iters * per_iter / (ms / 1e3) / sms

    a = cupy.ones((8192, 8192), cupy.float16)
    tensor_ms = timing.median_ms(lambda: a @ a)
    launches = 1000

    def many_empty():
        for _ in range(launches):
            empty((1,), (32,), ())

    acc, reps = cupy.zeros((16 << 20) // 4, cupy.float32), 16
    rows = acc.size // 128
    added_ms = timing.median_ms(lambda: adds(grid, block, (acc, cupy.int32(rows), cupy.int32(reps))))

    return {
        "l2_atomic": acc.nbytes * reps / (added_ms / 1e3),
        "l2_bulk_reduce": bulk_reduce_rate(acc.reshape(1, 32, -1, 128), reps) if device.capability() == "9.0" else 0.0,
        "dram_read": read_rate(2 << 30, 1),
        "l2_read": read_rate(16 << 20, 64),
        "exp2_per_sm": per_sm(exps, 4096, 8),
        "fma_per_sm": per_sm(fmas, 4096, 8),
        "tensor_fp16": 2 * 8192**3 / (tensor_ms / 1e3),
        "launch_seconds": timing.median_ms(many_empty) / 1e3 / launches,
    }


def bulk_reduce_rate(acc, reps: int) -> float:
    """Bytes/s TMA reduce-adds add into `acc` (1, planes, rows, 128) float32, resident in L2, `reps` times over."""
    from gpu import device, tma
    from gpu.lab import timing

    cupy = device.require()
    fn = cupy.RawModule(code=REDUCE_SOURCE, options=("--std=c++17", "-arch=sm_90a")).get_function("reduces")
    fn.max_dynamic_shared_size_bytes = REDUCE_SMEM
    _, planes, rows, _ = acc.shape
    sms = device.properties()["sm_count"]
    clocks = cupy.zeros(2 * sms, cupy.int64)
    args = (tma.accumulator_map(acc, 64), cupy.int32(planes), cupy.int32(rows), cupy.int32(reps), cupy.int32(1), clocks)
    ms = timing.median_ms(lambda: fn((sms,), (256,), args, shared_mem=REDUCE_SMEM))
    return acc.nbytes * reps / (ms / 1e3)


def reduce_clocks(acc, reps: int) -> float:
    """SM clocks from one warpgroup's TMA reduce-add of its (64, 64) float32 tile to the wait for its reads
    (`cp.async.bulk.wait_group.read 0`, as rung 7's thread waits before writing its tile again), every SM's two
    warpgroups adding at once into `acc`; the median over the warpgroups."""
    from gpu import device, tma

    cupy = device.require()
    fn = cupy.RawModule(code=REDUCE_SOURCE, options=("--std=c++17", "-arch=sm_90a")).get_function("reduces")
    fn.max_dynamic_shared_size_bytes = REDUCE_SMEM
    _, planes, rows, _ = acc.shape
    sms = device.properties()["sm_count"]
    clocks = cupy.zeros(2 * sms, cupy.int64)
    args = (tma.accumulator_map(acc, 64), cupy.int32(planes), cupy.int32(rows), cupy.int32(reps), cupy.int32(0), clocks)
    for _ in range(2):  # the first launch warms up; the second is read
        fn((sms,), (256,), args, shared_mem=REDUCE_SMEM)
    return float(cupy.median(clocks))


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
    acc = cupy.zeros((1, 32, (16 << 20) // 4 // 32 // 128, 128), cupy.float32)
    return {
        "skeleton_clocks": skeleton_clocks(),
        "wgmma_clocks": groups,
        "turn_clocks": float(cupy.median(clocks[:sms])) / (2 * rounds + 1),
        "stage_clocks": stages,
        "reduce_clocks": reduce_clocks(acc, 16),
    }


SKELETON_SPINS = {(64, 128): (512, 128, 128, 128), (128, 64): (256, 64, 64, 128)}  # exps, dS, its stores, τ dQ's


def skeleton_clocks() -> dict:
    """SM clocks per step of GROUPS_SOURCE's skeleton at each (d, Br): "bare" (no spins) and "spun" (SKELETON_SPINS:
    the cycles the model gives those operations at the H100 preset's rates); the median over the SMs."""
    from gpu import device

    cupy = device.require()
    sms, steps = device.properties()["sm_count"], 256
    clocks = cupy.zeros(2 * sms, cupy.int64)
    out = {}
    for (d, br), spins in SKELETON_SPINS.items():
        fn = cupy.RawModule(code=groups_source(d, br), options=("--std=c++17", "-arch=sm_90a")).get_function("skeleton")
        fn.max_dynamic_shared_size_bytes = GROUPS_SMEM
        for name, spun in (("bare", (0, 0, 0, 0)), ("spun", spins)):
            for _ in range(2):
                fn((sms,), (256,), (cupy.int32(steps), *map(cupy.int32, spun), clocks), shared_mem=GROUPS_SMEM)
            out[f"d{d} br{br} {name}"] = float(cupy.median(clocks.reshape(sms, 2).max(axis=1))) / steps
    return out


def host_seconds() -> dict[str, float]:
    """Seconds per public call on HOST_SHAPE, back to back, for each rung that runs on this GPU at d = 64."""
    from functools import partial

    from gpu import device, registry
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab import timing
    from gpu.lab.checks import random_like, random_qkv

    cc, g = device.capability(), HOST_SHAPE
    q, k, v = random_qkv(g["batch"], g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
    o, lse = flash_attention(q, k, v, return_lse=True)
    do = random_like(q, 1)
    calls = {f"forward {r}": partial(flash_attention, q, k, v, kernel=r) for r, spec in registry.FORWARD.items()
             if spec.fits(g["d"], cc) is None}  # fmt: skip
    calls |= {f"backward {r}": partial(flash_attention_backward, q, k, v, o, lse, do, kernel=r)
              for r, spec in registry.BACKWARD.items() if spec.fits(g["d"], cc) is None}  # fmt: skip
    return {name: timing.median_ms(fn) / 1e3 for name, fn in calls.items()}


USAGE = "usage: python -m gpu.lab.calibrate OUT.json (on a GPU)"


def main(argv=None) -> None:
    from gpu import device
    from gpu.lab import results

    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["--help"], ["-h"]):
        print(USAGE)
        return
    if len(args) != 1 or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    path = args[0]
    try:
        record = {
            "kind": "calibration",
            "env": results.environment(f"python -m gpu.lab.calibrate {path}"),
            "rates": calibrate(),
            "latencies": latencies(),
            "host_shape": HOST_SHAPE,
            "host_seconds": host_seconds(),
        }
    except device.GPUUnavailableError as e:
        sys.exit(f"calibrate: {e}")
    Path(path).write_text(json.dumps(record, indent=1))
    print(json.dumps({k: record[k] for k in ("rates", "latencies", "host_seconds")}, indent=1))


if __name__ == "__main__":
    main()
