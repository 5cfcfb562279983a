"""The CUDA C++ of backward rung 7's latency microbenchmarks (gpu/lab/rung7_latencies.py compiles it per head dim
and Br, with common.cuh and hopper.cuh inlined)."""

GROUPS_SOURCE = r"""
// backward rung 7's latencies (gpu/lab/rung7_latencies.py): the three kinds of wgmma commit group
// 07_flash2_backward_wgmma.cu issues, with its descriptors (its issue_transposed, issue_key_grads and issue_dq), its
// turns, one stage of its producer and a skeleton of its two consumer warpgroups, timed by clock64 on each SM
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

// the skeleton with the consumers' own work of 07_flash2_backward_wgmma.cu in place of the spins (lines 11 and 14 with
// L_i, D_i read from SRAM and the mask's branches, dS_ij stored by stmatrix, τ dQ stored to SRAM and the warpgroup's
// barrier), still without producer, copies and reduce-adds: which part of the step the kernel's work lengthens
extern "C" __global__ void __launch_bounds__(256, 1) skeleton_work(int steps, int edge_flag, long long* clocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 base = (smem_u32(smem) + 1023) & ~1023u;
    for (u32 at = 4 * threadIdx.x; at < 2 * TILE_KV + 2 * TILE_Q + 4 * TILE_DS + 2 * 64 * DQ_COLS * 4 + 2 * BR * 4; at += 4 * blockDim.x)
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(base + at), "r"(0x2C002C00u) : "memory");
    fence_proxy_async();
    __syncthreads();
    const int c = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const u32 sK = base, sV = sK + TILE_KV, sQ = sV + TILE_KV, sdO = sQ + TILE_Q, sdS = sdO + TILE_Q;
    const u32 sdQ = sdS + 2 * 2 * TILE_DS, sLD = sdQ + 2 * 64 * DQ_COLS * 4;
    const float* Lb_i = reinterpret_cast<const float*>(smem + (sLD - smem_u32(smem)));
    const float* D_i = Lb_i + BR;
    const bool edge = edge_flag != 0;
    const float scale_log2 = 0.125f * LOG2E;
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
#pragma unroll
        for (int n = 0; n < BR / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int qi = n * 8 + 2 * t + (e & 1);
                float p = exp2_approx(fmaf(st[4 * n + e], scale_log2, -Lb_i[qi]));
                if (edge) {
                    const int k_e = c * 64 + warp * 16 + g + (e >> 1) * 8;
                    if (k_e >= steps + 4096 || qi >= BR || k_e > qi + it) p = 0.f;
                }
                st[4 * n + e] = p;
            }
        wgmma_wait<0>();
        keep(dpt);
#pragma unroll
        for (int n = 0; n < BR / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) dpt[4 * n + e] = st[4 * n + e] * (dpt[4 * n + e] - D_i[n * 8 + 2 * t + (e & 1)]);
#pragma unroll
        for (int kk = 0; kk < BR / 16; ++kk) {
            accumulators_to_a(pf[kk], st + 8 * kk, st + 8 * kk + 4);
            accumulators_to_a(dsf[kk], dpt + 8 * kk, dpt + 8 * kk + 4);
        }
        asm volatile("bar.sync %0, 256;\n" ::"r"(4 + c) : "memory");
        const u32 ds_lane = sdS + (it % 2) * 2 * TILE_DS + c * TILE_DS + (8 * (lane / 16) + lane % 8) * 128 +
                            (((2 * warp + (lane / 8) % 2) ^ (lane % 8)) << 4);
#pragma unroll
        for (int kk = 0; kk < BR / 16; ++kk)
            asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(ds_lane + kk * 16 * 128),
                         "r"(dsf[kk][0]), "r"(dsf[kk][1]), "r"(dsf[kk][2]), "r"(dsf[kk][3]) : "memory");
        fence_proxy_async();
        group_grads(dv, pf, dk, dsf, sdO, sQ);
        wgmma_wait<0>();
        keep(dv);
        keep(dk);
        keep(pf);
        keep(dsf);
        group_dq(dq, sdS + ((it + 1) % 2) * 2 * TILE_DS + c * 64 * 128, sK, 0);
        asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - c) : "memory");
        wgmma_wait<0>();
        keep(dq);
        const u32 tile = sdQ + c * 64 * DQ_COLS * 4;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int q = warp * 16 + g + 8 * h;
#pragma unroll
            for (int n = 0; n < DQ_COLS / 8; ++n) {
                const u32 at = tile + (n / 4) * 64 * 128 + q * 128 + (((2 * (n % 4) + t / 2) ^ g) << 4) + (t % 2) * 8;
                asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(0.125f * dq[4 * n + 2 * h]),
                             "f"(0.125f * dq[4 * n + 2 * h + 1]) : "memory");
            }
        }
        fence_proxy_async();
        asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
        sum += dq[0];
    }
    if (c == 0) asm volatile("bar.sync 4, 256;\n" ::: "memory");
    const long long stop = clock64();
#pragma unroll
    for (int e = 0; e < NACC; ++e) sum += dv[e] + dk[e];
    if (threadIdx.x % 128 == 0) clocks[2 * blockIdx.x + c] = sum == 12345.f ? 0 : stop - start;
}
"""
