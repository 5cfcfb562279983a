// 01_flash2_readable.cu (rung 1, "v1"): FlashAttention-2 forward, written to be read next to sim/algorithms/flash2.py.
//
// 2026-11-29 (gpu/NOTES.md run 56): a Q block none of whose rows sees a key (N > Nk) loads nothing; L2 → SM bytes
// = the simulator's at N 1536, Nk 512 causal (rungs 2, 3; memcheck and racecheck clean).
//
// What it is: the first kernel of the progression. One thread block per (Q block i, batch·head);
// its SRAM (shared memory) holds Q_i, K_j, V_j, S_ij, O_i, m_i, ℓ_i exactly as the simulator's SRAM
// does, and every step is a loop over those tiles in float32 on the CUDA cores. Line numbers are
// those of Algorithm 1 in the FlashAttention-2 paper (Dao, 2023). Storage in HBM is float32, float16
// or bfloat16 (STORAGE = 0, 1, 2); all arithmetic is float32, like the simulator's accumulators.
//
// Changed from the simulator: nothing in the algorithm; the only additions are the thread loops
// that split each tile operation over NTHREADS threads, and __syncthreads() between steps.
//
// Measured (NVIDIA H100 80GB HBM3, `flashsim bench gpu`, 16k tokens per batch, hidden 2048, gpu/NOTES.md):
// 2.6 to 2.9 TFLOP/s for N = 512 … 2048, d = 64 and 128, fp16 and bf16, causal or not: about 1/100 of v2.
// Each element of S_ij is a scalar dot product read from SRAM, one thread per row does the softmax while
// the others wait at the barrier, and O_i lives in SRAM rather than registers. That is the point of v1:
// it is the algorithm, not the machine. Correct from the first run that compiled (after NVRTC refused
// INFINITY, see rung 2's header); clean under compute-sanitizer memcheck and racecheck at ragged sizes.
//
// Loads of Q, K, V bypass L1 (load_cg: ld.global.cg, cached at L2 only). With plain loads, thread blocks of one
// head resident on the same SM shared K_j, V_j in L1, and what reached the SMs from L2 was ×0.87–0.93 of the
// requests on full (not causal) shapes (gpu/NOTES.md runs 33, 34: the machine model, which counts every request
// at L2 as the simulator does, predicted up to ×1.16 of ncu's L2 → SM bytes). Every request now reaches L2, so
// the simulator's global bytes are what L2 hands the SMs (gpu/NOTES.md run 35-model4).
//
// Injected #defines: HEAD_DIM (d), BR (Br), BC (Bc), NTHREADS, STORAGE.

#include "common.cuh"  // NEG_INF, storage_t, to_float, from_float

// one element from HBM through L2 only (ld.global.cg): no L1 line another thread block on this SM could hit
__device__ __forceinline__ storage_t load_cg(const storage_t* p) {
    storage_t x;
#if STORAGE == 0
    asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(x) : "l"(p));
#else
    asm volatile("ld.global.cg.u16 %0, [%1];\n" : "=h"(x) : "l"(p));
#endif
    return x;
}

// Q: (batch·heads, N, d), K and V: (batch·heads, Nk, d), O: like Q, L: (batch·heads, N), all in HBM.
// Grid: (Tr, batch·heads). Query r sees key c iff c ≤ r + Nk − N when causal (bottom-right aligned).
extern "C" __global__ void __launch_bounds__(NTHREADS)
flash2_v1_fwd(const storage_t* Q, const storage_t* K, const storage_t* V, storage_t* O, float* L,
              int N, int Nk, float scale, int causal)
{
    extern __shared__ float sram[];
    float* Q_i = sram;                 // SRAM, (Br, d)
    float* K_j = Q_i + BR * HEAD_DIM;  // SRAM, (Bc, d)
    float* V_j = K_j + BC * HEAD_DIM;  // SRAM, (Bc, d)
    float* S_ij = V_j + BC * HEAD_DIM; // SRAM, (Br, Bc); holds P̃_ij after line 9
    float* O_i = S_ij + BR * BC;       // SRAM, (Br, d)
    float* m_i = O_i + BR * HEAD_DIM;  // SRAM, (Br)
    float* l_i = m_i + BR;             // SRAM, (Br)
    float* rescale = l_i + BR;         // SRAM, (Br): e^{m_i^(j−1) − m_i^(j)}

    const int tid = threadIdx.x;
    const int i = blockIdx.x;
    const size_t bh = blockIdx.y;
    const int r0 = i * BR;
    const int rows = min(BR, N - r0);  // the last Q block may be ragged
    const storage_t* Q_hbm = Q + (bh * N + r0) * HEAD_DIM;
    const storage_t* K_hbm = K + bh * Nk * HEAD_DIM;
    const storage_t* V_hbm = V + bh * Nk * HEAD_DIM;

    // line 6's bound: j = 1 … Tc (causal: stop at the last K/V block that row r0 + rows − 1 can see)
    int Tc = (Nk + BC - 1) / BC;
    if (causal) {
        const int last_key = r0 + rows - 1 + Nk - N;
        Tc = last_key < 0 ? 0 : min(Tc, last_key / BC + 1);
    }
    // line 4: load Q_i from HBM to SRAM (through L2, not L1: see the header); not where no row of it sees a key
    // (Tc = 0, N > Nk: O_i = 0 and L_i = −∞ are written alone, as sim.algorithms.flash2 and FlashAttention-2 do)
    if (Tc > 0)
        for (int e = tid; e < rows * HEAD_DIM; e += NTHREADS) Q_i[e] = to_float(load_cg(Q_hbm + e));
    // line 5: on chip, O_i = 0, ℓ_i = 0, m_i = −∞
    for (int e = tid; e < BR * HEAD_DIM; e += NTHREADS) O_i[e] = 0.f;
    for (int r = tid; r < BR; r += NTHREADS) { l_i[r] = 0.f; m_i[r] = NEG_INF; }

    for (int j = 0; j < Tc; ++j) {
        const int c0 = j * BC;
        const int cols = min(BC, Nk - c0);  // the last K/V block may be ragged
        __syncthreads();  // every thread is done with K_j−1, V_j−1
        // line 7: load K_j, V_j from HBM to SRAM (through L2, not L1)
        for (int e = tid; e < cols * HEAD_DIM; e += NTHREADS) {
            K_j[e] = to_float(load_cg(K_hbm + (size_t)c0 * HEAD_DIM + e));
            V_j[e] = to_float(load_cg(V_hbm + (size_t)c0 * HEAD_DIM + e));
        }
        __syncthreads();
        // line 8: S_ij = scale · Q_i K_jᵀ, (Br, Bc); keys past Nk or hidden by the mask get −∞
        for (int e = tid; e < BR * BC; e += NTHREADS) {
            const int r = e / BC, c = e % BC;
            float s = NEG_INF;
            if (r < rows && c < cols && !(causal && c0 + c > r0 + r + Nk - N)) {
                s = 0.f;
                for (int k = 0; k < HEAD_DIM; ++k) s += Q_i[r * HEAD_DIM + k] * K_j[c * HEAD_DIM + k];
                s *= scale;
            }
            S_ij[e] = s;
        }
        __syncthreads();
        // line 9: m_i^(j) = max(m_i^(j−1), rowmax(S_ij)), P̃_ij = exp(S_ij − m_i^(j)),
        //         ℓ_i^(j) = e^{m_i^(j−1) − m_i^(j)} ℓ_i^(j−1) + rowsum(P̃_ij); one thread per row
        for (int r = tid; r < rows; r += NTHREADS) {
            float m_new = m_i[r];
            for (int c = 0; c < BC; ++c) m_new = fmaxf(m_new, S_ij[r * BC + c]);
            // a row that has seen no key yet keeps m = −∞: use 0 as the shift so exp(−∞ − 0) = 0, not NaN
            const float shift = m_new == NEG_INF ? 0.f : m_new;
            float rowsum = 0.f;
            for (int c = 0; c < BC; ++c) {
                const float p = expf(S_ij[r * BC + c] - shift);
                S_ij[r * BC + c] = p;
                rowsum += p;
            }
            rescale[r] = expf(m_i[r] - shift);
            l_i[r] = rescale[r] * l_i[r] + rowsum;
            m_i[r] = m_new;
        }
        __syncthreads();
        // line 10: O_i^(j) = diag(e^{m_i^(j−1) − m_i^(j)}) O_i^(j−1) + P̃_ij V_j
        for (int e = tid; e < rows * HEAD_DIM; e += NTHREADS) {
            const int r = e / HEAD_DIM, k = e % HEAD_DIM;
            float acc = rescale[r] * O_i[e];
            for (int c = 0; c < cols; ++c) acc += S_ij[r * BC + c] * V_j[c * HEAD_DIM + k];
            O_i[e] = acc;
        }
    }
    __syncthreads();
    // line 12: O_i = diag(ℓ_i)^−1 O_i (a row that saw no key has ℓ = 0 and outputs zeros; a NaN ℓ stays NaN)
    // line 14: write O_i to HBM
    for (int e = tid; e < rows * HEAD_DIM; e += NTHREADS) {
        const float l = l_i[e / HEAD_DIM];
        O[(bh * N + r0) * HEAD_DIM + e] = from_float(l == 0.f ? 0.f : O_i[e] / l);
    }
    // line 13: L_i = m_i + log ℓ_i (−∞ for a row that saw no key); line 15: write L_i to HBM
    for (int r = tid; r < rows; r += NTHREADS)
        L[bh * N + r0 + r] = l_i[r] == 0.f ? NEG_INF : m_i[r] + logf(l_i[r]);
}
