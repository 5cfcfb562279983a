"""The cost of backward rung 7's fences (`python -m gpu.lab.calibrate` records it among its "latencies" as
"fence_clocks"): the SM clocks a consumer warp waits in `fence.proxy.async` after its stores to SRAM (dS_ij's
stmatrix before dV_j and dK_j; τ dQ's stores before the reduce-add), which the kernel's SASS keeps as MEMBAR.ALL.CTA
and FENCE.VIEW.ASYNC.S and where ncu's samples found ~240 and ~290 clocks a step at d = 64 (gpu/NOTES.md run
39-model8). Compiled with GROUPS_SOURCE (its shapes, group_s), per head dim and Br."""

from gpu.lab.rung7_latencies import GROUP_SHAPES, GROUPS_SMEM, groups_source

FENCES_SOURCE = r"""
// a fence after rung 7's stores to SRAM, what it costs the storing warp (gpu/lab/rung7_fences.py's fence_clocks):
// warpgroup 0 stores as 07_flash2_backward_wgmma.cu does, then its clock64 cycles from the last store's issue through
// fence.proxy.async and the instruction that follows it there: kind 0, dS_ij's BR / 16 stmatrix.x4.trans, then
// wgmma.fence (issue_key_grads' first); kind 1, τ dQ's DQ_COLS / 8 × 2 st.shared.v2.f32 (swizzled, as store_dq), then
// the warpgroup's barrier. With `loaded`, warpgroup 1 meanwhile keeps S_ijᵀ-kind groups on the tensor pipe (wgmma
// reading K_j and Q_i from SRAM, as the other consumer's products) until warpgroup 0 is done. clocks[block]: the
// slowest warp of warpgroup 0, cycles summed over `reps`
extern "C" __global__ void __launch_bounds__(256, 1) fences(int reps, int kind, int loaded, long long* clocks) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 base = (smem_u32(smem) + 1023) & ~1023u;
    const u32 sK = base, sQ = sK + 2 * TILE_KV, sdS = sQ + 2 * TILE_Q, sdQ = sdS + TILE_DS, flag = sdQ + 64 * DQ_COLS * 4;
    for (u32 at = 4 * threadIdx.x; at < flag - base; at += 4 * blockDim.x)
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(base + at), "r"(0x2C002C00u) : "memory");
    if (threadIdx.x == 0) asm volatile("st.shared.u32 [%0], 0;\n" ::"r"(flag) : "memory");
    fence_proxy_async();
    __syncthreads();
    const int c = threadIdx.x / 128, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    if (c == 1) {
        if (!loaded) return;
        float st[BR / 2], sum = 0.f;  // every accumulator used: ptxas drops a wgmma whose results are unused
        int done = 0;
        while (!done) {
            group_s(st, sK + 64 * 128, sQ, 0);
            wgmma_wait<0>();
#pragma unroll
            for (int e = 0; e < BR / 2; ++e) sum += st[e];
            asm volatile("ld.volatile.shared.u32 %0, [%1];\n" : "=r"(done) : "r"(flag) : "memory");
        }
        if (sum == 12345.f) clocks[gridDim.x] = 0;  // never
        return;
    }
    u32 dsf[BR / 16][4];
    float dq[DQ_COLS / 2];
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(dsf[kk][e]) : "r"(sQ + 16 * kk + 4 * e));
#pragma unroll
    for (int e = 0; e < DQ_COLS / 2; ++e) dq[e] = __uint_as_float(dsf[e % (BR / 16)][e % 4]);
    const u32 ds_lane = sdS + (8 * (lane / 16) + lane % 8) * 128 + (((2 * warp + (lane / 8) % 2) ^ (lane % 8)) << 4);
    long long spent = 0;
    for (int r = 0; r < reps; ++r) {
        if (kind == 0) {
#pragma unroll
            for (int kk = 0; kk < BR / 16; ++kk)
                asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(ds_lane + kk * 16 * 128),
                             "r"(dsf[kk][0]), "r"(dsf[kk][1]), "r"(dsf[kk][2]), "r"(dsf[kk][3]) : "memory");
        } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int q = warp * 16 + g + 8 * h;
#pragma unroll
                for (int n = 0; n < DQ_COLS / 8; ++n) {
                    const u32 at = sdQ + (n / 4) * 64 * 128 + q * 128 + (((2 * (n % 4) + t / 2) ^ g) << 4) + (t % 2) * 8;
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(0.125f * dq[4 * n + 2 * h]),
                                 "f"(0.125f * dq[4 * n + 2 * h + 1]) : "memory");
                }
            }
        }
        const long long start = clock64();
        fence_proxy_async();
        if (kind == 0) wgmma_fence();
        else asm volatile("bar.sync 1, 128;\n" ::: "memory");
        spent += clock64() - start;
        asm volatile("bar.sync 1, 128;\n" ::: "memory");  // the warps start each round together
    }
    if (lane == 0) atomicMax(reinterpret_cast<unsigned long long*>(clocks + blockIdx.x), (unsigned long long)spent);
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
    if (tid == 0) asm volatile("st.volatile.shared.u32 [%0], 1;\n" ::"r"(flag) : "memory");
}
"""


def fences_source(d: int, br: int) -> str:
    """GROUPS_SOURCE with FENCES_SOURCE after it, for head dim d and Br queries per step."""
    return groups_source(d, br) + FENCES_SOURCE


FENCES = {0: "dS_ij", 1: "τ dQ_i"}  # the fenced stores of FENCES_SOURCE's `fences`, by its kind


def fence_clocks() -> dict:
    """SM clocks a consumer warp spends in rung 7's fence after its stores to SRAM (FENCES_SOURCE's `fences`: the
    last store's issue to the instruction after the fence and the wgmma fence or barrier behind it), per round, the
    median over the SMs of each SM's slowest warp: {"d64 br128 dS_ij": …, …} with the other warpgroup's wgmma groups
    reading SRAM meanwhile (the kernel's load), and the same alone under "alone"."""
    from gpu import device

    cupy = device.require()
    sms, reps = device.properties()["sm_count"], 256
    clocks = cupy.zeros(sms + 1, cupy.int64)
    out: dict = {"alone": {}}
    for d, br in GROUP_SHAPES:
        mod = cupy.RawModule(code=fences_source(d, br), options=("--std=c++17", "-arch=sm_90a"))
        fn = mod.get_function("fences")
        fn.max_dynamic_shared_size_bytes = GROUPS_SMEM
        for kind, name in FENCES.items():
            for loaded in (1, 0):
                for _ in range(2):  # the first launch warms up; the second is read
                    clocks.fill(0)
                    fn((sms,), (256,), (cupy.int32(reps), cupy.int32(kind), cupy.int32(loaded), clocks),
                       shared_mem=GROUPS_SMEM)  # fmt: skip
                value = float(cupy.median(clocks[:sms])) / reps
                (out if loaded else out["alone"])[f"d{d} br{br} {name}"] = value
    return out


def latencies() -> dict:
    """{"fence_clocks": fence_clocks()} on sm_90a, {} elsewhere (as `gpu.lab.rung7_latencies.latencies`)."""
    from gpu import device

    device.require()
    return {"fence_clocks": fence_clocks()} if device.capability() == "9.0" else {}
