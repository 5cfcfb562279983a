// backward_passes.cu: the two element-wise passes around every FlashAttention-2 backward kernel (rungs 4, 5, 7).
//
// flash2_bwd_prepass: the FlashAttention-2 paper's Algorithm 2, lines 3–4 (sim/algorithms/flash2_backward.py's
// pre-pass): D_i = rowsum(dO_i ∘ O_i) in float32, and dQ = 0 — here the float32 accumulator the main kernel
// adds into (atomics, or TMA reductions), since its thread blocks (one per K/V block) all update every dQ_i at
// once. For rung 7 it also packs L_i (times log2 e) and D_i per Q block, so that one bulk copy brings both.
// flash2_bwd_dq: dQ = that accumulator, rounded once to the storage dtype.
//
// One warp per row in the pre-pass, 16-byte loads where rows are whole 16-byte pieces (WIDE). Their time is part
// of every backward timing: at N = 2048, d = 64, 16 heads, fp16 (ncu, run 10) 8 µs each, against 209 µs for the
// main kernel.
//
// Injected #defines: HEAD_DIM (row length in HBM), STORAGE (0 fp32, 1 fp16, 2 bf16), WIDE (16-byte loads).

#include "common.cuh"  // storage_t, to_float, from_float

// Σ over the elements of 16 bytes of O times the same 16 bytes of dO, in float32
__device__ __forceinline__ float dot16(uint4 a, uint4 b) {
    const u32 x[4] = {a.x, a.y, a.z, a.w}, y[4] = {b.x, b.y, b.z, b.w};
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#if STORAGE == 0
        s += __uint_as_float(x[w]) * __uint_as_float(y[w]);
#else
        s += to_float(x[w] & 0xffff) * to_float(y[w] & 0xffff) + to_float(x[w] >> 16) * to_float(y[w] >> 16);
#endif
    }
    return s;
}

#if PASSES_V2
// ROW_LANES lanes per row (a power of two ≤ 32: one 16-byte piece of O and dO each per lane and step), 32 / ROW_LANES
// rows per warp; dQacc zeroed by 16-byte stores. Grid: ceil(heads · padded · ROW_LANES / blockDim.x).
extern "C" __global__ void flash2_bwd_prepass(const storage_t* O, const storage_t* dO, float* D, float* dQacc,
                                              const float* L, float* LD, int heads, int N, int padded, int br)
{
    const long long at = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / ROW_LANES;
    const int lane = threadIdx.x % ROW_LANES;
    const u32 mask = ROW_LANES == 32 ? 0xffffffffu : ((1u << ROW_LANES) - 1) << (threadIdx.x % 32 / ROW_LANES * ROW_LANES);
    if (at >= (long long)heads * padded) return;
    const int b = at / padded, r = at % padded;
    float* ld = LD ? LD + 2 * ((long long)b * padded + r - r % br) + r % br : nullptr;
    if (r >= N) {  // a padding row of the last LD block
        if (lane == 0) ld[0] = ld[br] = 0.f;
        return;
    }
    const long long row = (long long)b * N + r;
    const storage_t* o = O + row * HEAD_DIM;
    const storage_t* d_o = dO + row * HEAD_DIM;
    float sum = 0.f;
    constexpr int per = 16 / sizeof(storage_t);  // elements in 16 bytes
    for (int c = lane * per; c < HEAD_DIM; c += ROW_LANES * per)
        sum += dot16(*reinterpret_cast<const uint4*>(o + c), *reinterpret_cast<const uint4*>(d_o + c));
    for (int k = ROW_LANES / 2; k > 0; k /= 2) sum += __shfl_xor_sync(mask, sum, k);
    if (lane == 0) {
        D[row] = sum;
        if (ld) {
            ld[0] = L[row] * LOG2E;
            ld[br] = sum;
        }
    }
    for (int c = 4 * lane; c < HEAD_DIM; c += 4 * ROW_LANES)
        *reinterpret_cast<float4*>(dQacc + row * HEAD_DIM + c) = make_float4(0.f, 0.f, 0.f, 0.f);
}

// dQ[e] = dQacc[e] for e < n (a multiple of 4), rounded to the storage dtype, 4 elements per thread and step.
extern "C" __global__ void flash2_bwd_dq(const float* dQacc, storage_t* dQ, long long n)
{
    for (long long e = 4 * (blockIdx.x * (long long)blockDim.x + threadIdx.x); e < n; e += 4ll * gridDim.x * blockDim.x) {
        const float4 x = *reinterpret_cast<const float4*>(dQacc + e);
#if STORAGE == 0
        *reinterpret_cast<float4*>(dQ + e) = x;
#else
        *reinterpret_cast<uint2*>(dQ + e) = make_uint2((u32)from_float(x.x) | (u32)from_float(x.y) << 16,
                                                       (u32)from_float(x.z) | (u32)from_float(x.w) << 16);
#endif
    }
}
#else
// O, dO: (heads, N, HEAD_DIM); D: (heads, N); dQacc: (heads, N, HEAD_DIM) float32; L: the forward's log-sum-exp
// (heads, N); LD: null, or rung 7's (heads, padded / br, 2, br) float32 blocks of L_i·log2 e then D_i (br: its Br),
// one contiguous copy per Q block, zeros past N. Rows: heads × padded (N, or N rounded up to br with LD).
// Grid: ceil(heads · padded / warps per block).
extern "C" __global__ void flash2_bwd_prepass(const storage_t* O, const storage_t* dO, float* D, float* dQacc,
                                              const float* L, float* LD, int heads, int N, int padded, int br)
{
    const long long at = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (at >= (long long)heads * padded) return;
    const int b = at / padded, r = at % padded;
    float* ld = LD ? LD + 2 * ((long long)b * padded + r - r % br) + r % br : nullptr;
    if (r >= N) {  // a padding row of the last LD block
        if (lane == 0) ld[0] = ld[br] = 0.f;
        return;
    }
    const long long row = (long long)b * N + r;
    const storage_t* o = O + row * HEAD_DIM;
    const storage_t* d_o = dO + row * HEAD_DIM;
    float sum = 0.f;
#if WIDE
    constexpr int per = 16 / sizeof(storage_t);  // elements in 16 bytes
    for (int c = lane * per; c < HEAD_DIM; c += 32 * per)
        sum += dot16(*reinterpret_cast<const uint4*>(o + c), *reinterpret_cast<const uint4*>(d_o + c));
#else
    for (int c = lane; c < HEAD_DIM; c += 32) sum += to_float(o[c]) * to_float(d_o[c]);
#endif
    for (int k = 16; k > 0; k /= 2) sum += __shfl_xor_sync(0xffffffff, sum, k);
    if (lane == 0) {
        D[row] = sum;
        if (ld) {
            ld[0] = L[row] * LOG2E;
            ld[br] = sum;
        }
    }
    for (int c = lane; c < HEAD_DIM; c += 32) dQacc[row * HEAD_DIM + c] = 0.f;
}

// dQ[e] = dQacc[e] for e < n, rounded to the storage dtype. Grid-stride.
extern "C" __global__ void flash2_bwd_dq(const float* dQacc, storage_t* dQ, long long n)
{
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x)
        dQ[e] = from_float(dQacc[e]);
}
#endif
