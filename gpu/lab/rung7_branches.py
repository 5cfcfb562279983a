"""The cost of backward rung 7's mask branches (`python -m gpu.lab.calibrate` records it among its "latencies" as
"branch_clocks", through gpu.lab.rung7_latencies): SM clocks one taken branch adds to a warp's stream of line 11,
the kernel's per-element `if (edge)` that its SASS keeps as a branch over the mask and takes on every inner tile."""

BRANCH_SOURCE = r"""
// the cost of line 11's mask branches on an inner tile (gpu/lab/rung7_branches.py's branch_clocks). In
// 07_flash2_backward_wgmma.cu's SASS each element of P_ijᵀ = exp2(τ S_ijᵀ − L_i) has its own `@!P BRA` over the
// mask's eight instructions, taken on every inner tile (the mask skipped). Each of 256 threads (two warps per
// scheduler, as rung 7's two consumer warpgroups) runs `reps` passes over its 64 elements, L_i from SRAM (read again
// each pass, as each step does): mask_branch with the kernel's test of `edge` (false here) and mask per element (the
// empty asm keeps ptxas from predicating it, as it does the kernel's: without it, C++ or PTX, the branches became
// FSELs), mask_plain without them; its clock64 cycles per pass, the slowest warp of each SM
#include "common.cuh"

template <bool BRANCH>
__device__ __forceinline__ void mask_passes(long long* clocks, int reps, int n, int nk, int causal) {
    __shared__ float L[128];
    if (threadIdx.x < 128) L[threadIdx.x] = 1.0f + threadIdx.x * 1e-3f;
    __syncthreads();
    const int lane = threadIdx.x % 32, t = lane % 4, key = (threadIdx.x / 32) * 16 + lane / 4;
    float st[64];
#pragma unroll
    for (int e = 0; e < 64; ++e) st[e] = 1e-3f * (e + lane);
    const long long start = clock64();
    for (int r = 0; r < reps; ++r) {
        asm volatile("" ::: "memory");  // L_i from SRAM again
        const int r0 = r * 128, shift = nk - n;  // Q block r against K/V block 0, as the kernel's rows and shift
        const bool edge = 128 > nk || r0 + 128 > n || (causal && 127 > r0 + shift);  // the kernel's test: false
#pragma unroll
        for (int m = 0; m < 16; ++m)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int qi = m * 8 + 2 * t + (e & 1);
                float p = exp2_approx(fmaf(st[4 * m + e], 1e-3f, -L[qi]));
                if (BRANCH && edge) {
                    const int k_e = key + (e >> 1) * 8, q_e = r0 + qi;
                    if (k_e >= nk || q_e >= n || (causal && k_e > q_e + shift)) p = 0.f;
                    asm volatile("" ::: "memory");
                }
                st[4 * m + e] = p;
            }
    }
    const long long cycles = clock64() - start;
    float sum = 0.f;
#pragma unroll
    for (int e = 0; e < 64; ++e) sum += st[e];
    if (sum == -1.f) clocks[gridDim.x] = 0;  // never: keeps the passes
    if (lane == 0) atomicMax(reinterpret_cast<unsigned long long*>(clocks + blockIdx.x), (unsigned long long)cycles);
}

extern "C" __global__ void __launch_bounds__(256, 1) mask_branch(long long* clocks, int reps, int n, int nk, int causal) {
    mask_passes<true>(clocks, reps, n, nk, causal);
}
extern "C" __global__ void __launch_bounds__(256, 1) mask_plain(long long* clocks, int reps, int n, int nk, int causal) {
    mask_passes<false>(clocks, reps, n, nk, causal);
}
"""


MASK_ELEMENTS = 64  # elements of P_ijᵀ per thread in BRANCH_SOURCE (d = 64, Br = 128: Br / 2)


def branch_clocks() -> dict:
    """{"branch_clocks": SM clocks per taken branch, "mask_pass_clocks": {"branches": …, "none": …}} from
    BRANCH_SOURCE, every SM at once, the median over the SMs of each SM's slowest warp."""
    from gpu import device
    from gpu.source import INCLUDE, KERNEL_DIR

    cupy = device.require()
    sms, reps, n = device.properties()["sm_count"], 256, 1 << 16
    code = INCLUDE.sub(lambda line: (KERNEL_DIR / line[1]).read_text(), BRANCH_SOURCE)
    mod = cupy.RawModule(code=code, options=("--std=c++17", "-arch=sm_90a"))
    clocks = cupy.zeros(sms + 1, cupy.int64)
    passes = {}
    for name, kernel in (("branches", "mask_branch"), ("none", "mask_plain")):
        for _ in range(2):  # the first launch warms up; the second is read
            clocks.fill(0)
            args = (clocks, cupy.int32(reps), cupy.int32(n), cupy.int32(n + 128), cupy.int32(1))  # causal, every
            mod.get_function(kernel)((sms,), (256,), args)  # tile inner: keys 0 … 127 seen by every row r0 … of N
        passes[name] = float(cupy.median(clocks[:sms])) / reps
    return {"branch_clocks": (passes["branches"] - passes["none"]) / MASK_ELEMENTS, "mask_pass_clocks": passes}
