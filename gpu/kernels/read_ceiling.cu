// read_ceiling.cu: a kernel that only reads a decode step's K and V (the cache's bytes, from DRAM) and computes
// nothing: the time no decode kernel can beat at that size, launch and tail included, beside which `flashsim bench
// decode` puts rung 8, cuDNN and PyTorch's default (gpu/lab/bench_decode.py, as steps replayed from CUDA graphs).
//
// Each thread reads 16-byte pieces with streaming loads (ld.global.cs: the cache is read once), UNROLL of them in
// flight, grid-stride over K's n pieces and then V's, and folds them into one word that is stored only if it equals a
// value no input gives here (so the loads are not optimized away and nothing is written).
//
// Measured (NVIDIA H100 80GB HBM3, gpu/NOTES.md run 41; the cold copies of gpu.lab.bench_decode, 24 launches a graph):
// over 10 launch shapes, 132 × {1, 2, 4, 8, 16} blocks of 1024 … 256 threads and UNROLL 4 or 8, the best took 7.01 µs
// at B 1 Nk 4K (16 MiB: 71.5% of 3.35 TB/s), 44.31 at B 1 Nk 32K (90.4%), 86.43 at B 4 Nk 16K (92.7%). The shape kept,
// READ_BLOCKS_PER_SM = 16 blocks an SM of 256 threads, UNROLL 8, took 7.01, 44.79 and 88.14 µs there: the fastest at
// the short cache, within 1.1% and 2.0% of the best at the long ones (bench_decode's read_graph).
//
// Injected #defines: STORAGE (common.cuh's; the bytes are read whatever their dtype), UNROLL (pieces in flight a thread).

#include "common.cuh"  // u32

// K, V: n 16-byte pieces each (the cache's bytes); out: one word, written only if the fold equals 0x9e3779b9 (never
// for the bench's caches). Grid: any; blockDim.x threads, no shared memory.
extern "C" __global__ void read_ceiling(const uint4* __restrict__ K, const uint4* __restrict__ V, long long n, u32* out)
{
    const long long stride = (long long)gridDim.x * blockDim.x, total = 2 * n;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    u32 fold = 0;
    for (; i + (UNROLL - 1) * stride < total; i += UNROLL * stride) {
        uint4 x[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long at = i + u * stride;
            x[u] = __ldcs(at < n ? K + at : V + (at - n));
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) fold ^= x[u].x ^ x[u].y ^ x[u].z ^ x[u].w;
    }
    for (; i < total; i += stride) {
        const uint4 x = __ldcs(i < n ? K + i : V + (i - n));
        fold ^= x.x ^ x.y ^ x.z ^ x.w;
    }
    if (fold == 0x9e3779b9u) *out = fold;
}
