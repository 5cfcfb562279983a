// backward_passes.cu: the two element-wise passes around every FlashAttention-2 backward kernel (rungs 4, 5, 7).
//
// flash2_bwd_prepass: the FlashAttention-2 paper's Algorithm 2, lines 3–4 (sim/algorithms/flash2_backward.py's
// pre-pass): D_i = rowsum(dO_i ∘ O_i) in float32, and dQ = 0 — here the float32 accumulator the main kernel
// adds into (atomics, or TMA reductions), since its thread blocks (one per K/V block) all update every dQ_i at
// once. For rung 7 it also packs L_i (times log2 e) and D_i per Q block, so that one bulk copy brings both.
// flash2_bwd_dq: dQ = that accumulator, rounded once to the storage dtype (rungs 4 and 5, and rung 7's builds that do
// not round dQ themselves: with a variant or atomics; gpu/backward.py's `fused`).
//
// Both are bound by HBM: the pre-pass reads O and dO and writes the accumulator (N·d·(2·2 + 4) bytes per head at
// fp16), the rounding reads it and writes dQ (N·d·(4 + 2)). Their time is part of every backward timing: at FlashAttention-3's
// shapes (16k tokens, hidden 2048, fp16; gpu/NOTES.md run 37-bwd3, `python -m gpu.lab.backward_builds`) 97–98 µs
// and 68–70 µs, 2.7–2.9 TB/s, 14% of rung 7's backward at N = 1024, d = 64, 1% at N = 16384. Before run 37-bwd3: one
// warp per row, 8 of its lanes loading at d = 64, 4-byte zeros, and one element per thread in the rounding: 136–147 µs
// (d = 64; 98–101 at d = 128) and 91–95 µs. At their bytes (run 39-bwd5, H100, `python -m gpu.lab.backward_builds`'s
// floors, 16k tokens, d = 64): the pre-pass 97.7 µs beside 92.0 for a device-to-device copy of the accumulator (the
// same 128 MiB read and written; 2.9 TB/s), its zeroing alone by memset 43.8; the rounding 69.0 (192 MiB at 2.9 TB/s).
//
// Injected #defines: HEAD_DIM (row length in HBM), STORAGE (0 fp32, 1 fp16, 2 bf16), WIDE (rows of whole 16-byte
// pieces: 16-byte loads and stores), ROW_LANES (the pre-pass's lanes per row: geometry.passes_defines).

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

// O, dO: (heads, N, HEAD_DIM); D: (heads, N); dQacc: (heads, N, HEAD_DIM) float32; L: the forward's log-sum-exp (heads,
// N); LD: null, or rung 7's (heads, padded / br, 2, br) float32 blocks of L_i·log2 e then D_i (br: its Br), one
// contiguous copy per Q block, zeros past N; arrivals: null, or rung 7's (heads) int32 counters of the thread blocks
// done with each query plane (its FUSED_DQ: the last rounds the plane's dQ), zeroed here. Rows: heads × padded (N, or N
// rounded up to br with LD), one per ROW_LANES lanes (WIDE: a power of two ≤ 32, one 16-byte piece of O and of dO per
// lane and step, 16-byte zeros into dQacc; else 32, one element per lane and step). Grid: ceil(heads · padded ·
// ROW_LANES / blockDim.x). A packed batch with LD (cu_q: its (B + 1) offsets; rung 7): one head of N = total_q · Hq
// rows in O's order (token t, head h at row t·Hq + h), L (Hq, total_q), and LD (B, Hq, tr, 2, br), sequence s's rows
// from its block 0 on; the lane of its last row zeroes the rows of its last block past its end.
extern "C" __global__ void flash2_bwd_prepass(const storage_t* O, const storage_t* dO, float* D, float* dQacc,
                                              const float* L, float* LD, int* arrivals, const int* cu_q, int heads,
                                              int N, int padded, int br, int B, int Hq, int tr)
{
    const long long at = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / ROW_LANES;
    const int lane = threadIdx.x % ROW_LANES;
    const u32 mask = ROW_LANES == 32 ? 0xffffffffu : ((1u << ROW_LANES) - 1) << (threadIdx.x % 32 / ROW_LANES * ROW_LANES);
    if (at >= (long long)heads * padded) return;  // whole rows return: the lanes of `mask` stay together
    const int b = at / padded, r = at % padded;
    float* ld = LD && !cu_q ? LD + 2 * ((long long)b * padded + r - r % br) + r % br : nullptr;
    long long l_at = (long long)b * N + r;  // L's element of the row: (heads, N), or packed (Hq, total_q)
    if (LD && cu_q) {  // token t's sequence s by bisection: cu_q[s] ≤ t < cu_q[s + 1] (an empty one is passed over)
        const int t = r / Hq, h = r % Hq;
        l_at = (long long)h * (N / Hq) + t;
        int s = 0, hi = B;
        while (hi - s > 1) {
            const int mid = (s + hi) / 2;
            if (cu_q[mid] <= t) s = mid; else hi = mid;
        }
        const int rs = t - cu_q[s], last = cu_q[s + 1] - 1 - cu_q[s];  // the row in its sequence; the sequence's last
        ld = LD + 2 * (((long long)s * Hq + h) * tr * br + rs - rs % br) + rs % br;
        if (lane == 0 && rs == last)
            for (int e = 1; (rs + e) % br != 0; ++e) ld[e] = ld[br + e] = 0.f;
    }
    if (arrivals && lane == 0 && r == 0) arrivals[b] = 0;
    if (r >= N) {  // a padding row of the last LD block
        if (lane == 0) ld[0] = ld[br] = 0.f;
        return;
    }
    const long long row = (long long)b * N + r;
    const storage_t* o = O + row * HEAD_DIM;
    const storage_t* d_o = dO + row * HEAD_DIM;
    float* dq = dQacc + row * HEAD_DIM;
    float sum = 0.f;
#if WIDE
    constexpr int per = 16 / sizeof(storage_t);  // elements in 16 bytes
    for (int c = lane * per; c < HEAD_DIM; c += ROW_LANES * per)
        sum += dot16(*reinterpret_cast<const uint4*>(o + c), *reinterpret_cast<const uint4*>(d_o + c));
    for (int c = 4 * lane; c < HEAD_DIM; c += 4 * ROW_LANES) *reinterpret_cast<float4*>(dq + c) = make_float4(0.f, 0.f, 0.f, 0.f);
#else
    for (int c = lane; c < HEAD_DIM; c += ROW_LANES) {
        sum += to_float(o[c]) * to_float(d_o[c]);
        dq[c] = 0.f;
    }
#endif
    for (int k = ROW_LANES / 2; k > 0; k /= 2) sum += __shfl_xor_sync(mask, sum, k);
    if (lane == 0) {
        D[row] = sum;
        if (ld) {
            ld[0] = L[l_at] * LOG2E;
            ld[br] = sum;
        }
    }
}

// dQ[e] = dQacc[e] for e < n, rounded to the storage dtype; WIDE (n a multiple of 4): 4 elements per thread and
// step, one 16-byte load. Grid-stride.
extern "C" __global__ void flash2_bwd_dq(const float* dQacc, storage_t* dQ, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
#if WIDE
    for (long long e = 4 * (blockIdx.x * (long long)blockDim.x + threadIdx.x); e < n; e += 4 * stride) {
        const float4 x = *reinterpret_cast<const float4*>(dQacc + e);
#if STORAGE == 0
        *reinterpret_cast<float4*>(dQ + e) = x;
#else
        *reinterpret_cast<uint2*>(dQ + e) = make_uint2((u32)from_float(x.x) | (u32)from_float(x.y) << 16,
                                                       (u32)from_float(x.z) | (u32)from_float(x.w) << 16);
#endif
    }
#else
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += stride) dQ[e] = from_float(dQacc[e]);
#endif
}
