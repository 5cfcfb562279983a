// softmax_backward_rows.cu: dS = P ∘ (dP − rowsum(P ∘ dP)), row by row: the middle step of standard attention's
// backward (the FlashAttention paper's Algorithm 3, line 3), between cuBLAS matmuls that write dP and read dS.
//
// P and dP are read from HBM once and dS written once, all (batch·heads·N, Nk) in fp16/bf16; the row's
// products wait in shared memory in between. One thread block per row. P is zero where the causal mask hid a
// key, so dS is too: no mask is needed. The rowsum D_i is rowsum(P_i ∘ dP_i), which equals rowsum(dO_i ∘ O_i).
//
// Measured (NVIDIA H100 80GB HBM3, `flashsim bench gpu --backward`, run 10): standard attention forward + backward
// as a whole (five cuBLAS matmuls, this kernel and softmax_rows) runs at 20 to 190 TFLOP/s; P, dP and dS take
// 3·batch·heads·N·Nk·2 bytes (24 GiB at N = 16384, batch 1, 16 heads; out of memory at N = 32768).
//
// Injected #defines: STORAGE (1 float16, 2 bfloat16), NTHREADS.

#include "common.cuh"  // storage_t, to_float, from_float, block_reduce

// P, dP, dS: (batch·heads·N, Nk) in HBM. Grid: batch·heads·N blocks; dynamic SRAM: (2·Nk + NTHREADS / 32) floats.
extern "C" __global__ void __launch_bounds__(NTHREADS)
softmax_backward_rows(const storage_t* P, const storage_t* dP, storage_t* dS, int Nk)
{
    extern __shared__ float sram[];
    float* p = sram;              // SRAM: P[r, :], (Nk)
    float* dp = sram + Nk;        // SRAM: dP[r, :], (Nk)
    float* scratch = dp + Nk;     // SRAM: one partial per warp
    const size_t base = (size_t)blockIdx.x * Nk;
    float D = 0.f;
    for (int c = threadIdx.x; c < Nk; c += NTHREADS) {
        p[c] = to_float(P[base + c]);
        dp[c] = to_float(dP[base + c]);
        D += p[c] * dp[c];
    }
    D = block_reduce<false>(D, scratch);  // D_i = rowsum(P_i ∘ dP_i)
    for (int c = threadIdx.x; c < Nk; c += NTHREADS) dS[base + c] = from_float(p[c] * (dp[c] - D));
}
