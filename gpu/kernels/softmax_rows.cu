// softmax_rows.cu: P = softmax(scale · S), row by row: the middle step of standard attention
// (the FlashAttention paper's Algorithm 0, line 2), between two cuBLAS matmuls that write S and read P.
//
// S is read from HBM once and P written once, both (batch·heads·N, Nk) in fp16/bf16; the row waits in
// shared memory in between. One thread block per row. Causal masks align bottom-right: query r sees
// keys c ≤ r + Nk − N; hidden keys get P = 0, and a row that sees no key is all zeros (no NaN).
//
// Measured (NVIDIA H100 80GB HBM3, `flashsim bench gpu`): standard attention as a whole (two cuBLAS matmuls
// and this kernel) runs at 11 to 143 TFLOP/s; S and P take 2·batch·heads·N·Nk·2 bytes (up to 32 GiB at N = 16384).
//
// Injected #defines: STORAGE (1 float16, 2 bfloat16), NTHREADS.

#include "common.cuh"  // NEG_INF, storage_t, to_float, from_float, block_reduce

// S, P: (batch·heads·N, Nk) in HBM. Grid: batch·heads·N blocks; dynamic SRAM: (Nk + NTHREADS / 32) floats.
extern "C" __global__ void __launch_bounds__(NTHREADS)
softmax_rows(const storage_t* S, storage_t* P, int N, int Nk, float scale, int causal)
{
    extern __shared__ float sram[];
    float* row = sram;             // SRAM: scale · S[r, :], (Nk)
    float* scratch = sram + Nk;    // SRAM: one partial per warp
    const size_t base = (size_t)blockIdx.x * Nk;
    const int r = blockIdx.x % N;  // the query this row belongs to
    const int seen = causal ? max(0, min(Nk, r + Nk - N + 1)) : Nk;  // keys 0 … seen − 1 are visible

    float m = NEG_INF;
    for (int c = threadIdx.x; c < seen; c += NTHREADS) {
        row[c] = scale * to_float(S[base + c]);
        m = fmaxf(m, row[c]);
    }
    m = block_reduce<true>(m, scratch);
    float l = 0.f;
    for (int c = threadIdx.x; c < seen; c += NTHREADS) {
        row[c] = expf(row[c] - m);
        l += row[c];
    }
    l = block_reduce<false>(l, scratch);
    const float inv = l == 0.f ? 0.f : 1.f / l;  // a NaN sum (NaN in the inputs) stays NaN
    for (int c = threadIdx.x; c < Nk; c += NTHREADS) P[base + c] = from_float(c < seen ? row[c] * inv : 0.f);
}
