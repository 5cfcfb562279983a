// 04_flash2_backward_readable.cu (rung 4, backward "v1"): FlashAttention-2's backward pass, written to be read
// next to sim/algorithms/flash2_backward.py (the FlashAttention-2 paper's Algorithm 2), line by line.
//
// What it is: the first backward kernel. One thread block per (K/V block j, batch·head); its SRAM holds
// K_j, V_j, dK_j, dV_j, Q_i, dO_i, L_i, D_i, P_ij and dS_ij as the simulator's SRAM does, and every step is a
// loop over those tiles in float32 on the CUDA cores. P_ij is recomputed from the saved log-sum-exp L_i
// (line 11), never read: nothing N × Nk exists anywhere. The pre-pass (lines 3–4: D = rowsum(dO ∘ O), dQ = 0)
// and the final rounding of dQ are the kernels of backward_passes.cu.
//
// Changed from the simulator, and why:
//  - line 15: the simulator reads dQ_i, adds τ dS_ij K_j and writes it back, rounding to the storage dtype at
//    each write. Here the thread blocks of every j run at once and all update the same dQ_i, so the update is
//    an atomicAdd into a float32 copy of dQ in HBM, rounded to the storage dtype once at the end. (dQ is then
//    more accurate than the simulator's, and the last bits depend on the order the atomics land in.)
//  - the thread loops that split each tile operation over NTHREADS threads, and __syncthreads() between steps.
//
// Measured (NVIDIA H100 80GB HBM3, gpu/NOTES.md runs 8–10):
//  - Failure, run 8: dQ off by 0.4 to 0.75 (dK, dV right): τ was applied twice, in line 15 and again by the final
//    pass. The final pass now only rounds. Since run 9 every check passes (d 40, 64, 128; float32, fp16, bf16;
//    ragged, causal, N ≠ Nk), and compute-sanitizer memcheck and racecheck are clean.
//  - Speed (`python -m gpu.lab.harness --kernel 4`, N = 1024, 16k tokens, forward rung 3 + this backward): 4.0 to 4.7
//    TFLOP/s forward + backward, about 1/50 of rung 5 — the algorithm, not the machine, as rung 1 is.
//
// Injected #defines: HEAD_DIM (d), BR (Br), BC (Bc), NTHREADS, STORAGE (0 fp32, 1 fp16, 2 bf16).

#include "common.cuh"  // NEG_INF, storage_t, to_float, from_float

// Q, dO: (batch·heads, N, d); K, V, dK, dV: (batch·heads, Nk, d); L, D: (batch·heads, N) float32;
// dQacc: (batch·heads, N, d) float32, zeroed by the pre-pass. Grid: (Tc, batch·heads).
// Query r sees key c iff c ≤ r + Nk − N when causal (bottom-right aligned).
extern "C" __global__ void __launch_bounds__(NTHREADS)
flash2_v1_bwd(const storage_t* Q, const storage_t* K, const storage_t* V, const storage_t* dO, const float* L,
              const float* D, float* dQacc, storage_t* dK, storage_t* dV, int N, int Nk, float scale, int causal)
{
    extern __shared__ float sram[];
    float* K_j = sram;                  // SRAM, (Bc, d)
    float* V_j = K_j + BC * HEAD_DIM;   // SRAM, (Bc, d)
    float* dK_j = V_j + BC * HEAD_DIM;  // SRAM, (Bc, d)
    float* dV_j = dK_j + BC * HEAD_DIM; // SRAM, (Bc, d)
    float* Q_i = dV_j + BC * HEAD_DIM;  // SRAM, (Br, d)
    float* dO_i = Q_i + BR * HEAD_DIM;  // SRAM, (Br, d)
    float* P_ij = dO_i + BR * HEAD_DIM; // SRAM, (Br, Bc): S_ij, then P_ij
    float* dS_ij = P_ij + BR * BC;      // SRAM, (Br, Bc): dP_ij, then dS_ij
    float* L_i = dS_ij + BR * BC;       // SRAM, (Br)
    float* D_i = L_i + BR;              // SRAM, (Br)

    const int tid = threadIdx.x;
    const int j = blockIdx.x;
    const size_t bh = blockIdx.y;
    const int c0 = j * BC;
    const int cols = min(BC, Nk - c0);  // the last K/V block may be ragged
    const int shift = Nk - N;           // causal: query r sees key c iff c ≤ r + shift
    const storage_t* K_hbm = K + (bh * Nk + c0) * HEAD_DIM;
    const storage_t* V_hbm = V + (bh * Nk + c0) * HEAD_DIM;

    // line 6: load K_j, V_j from HBM to SRAM
    for (int e = tid; e < cols * HEAD_DIM; e += NTHREADS) {
        K_j[e] = to_float(K_hbm[e]);
        V_j[e] = to_float(V_hbm[e]);
    }
    // line 7: initialize dK_j = 0, dV_j = 0 on SRAM
    for (int e = tid; e < BC * HEAD_DIM; e += NTHREADS) dK_j[e] = dV_j[e] = 0.f;

    // line 8: for i = 1 … Tr; causal: Q blocks before the one holding row c0 − shift see none of K_j (skipped)
    const int Tr = (N + BR - 1) / BR;
    for (int i = causal ? max(0, c0 - shift) / BR : 0; i < Tr; ++i) {
        const int r0 = i * BR;
        const int rows = min(BR, N - r0);  // the last Q block may be ragged
        __syncthreads();  // every thread is done with Q_i−1, dO_i−1, L_i−1, D_i−1
        // line 9: load Q_i, dO_i, L_i, D_i from HBM to SRAM
        for (int e = tid; e < rows * HEAD_DIM; e += NTHREADS) {
            Q_i[e] = to_float(Q[(bh * N + r0) * HEAD_DIM + e]);
            dO_i[e] = to_float(dO[(bh * N + r0) * HEAD_DIM + e]);
        }
        for (int r = tid; r < rows; r += NTHREADS) {
            L_i[r] = L[bh * N + r0 + r];
            D_i[r] = D[bh * N + r0 + r];
        }
        __syncthreads();
        // line 10: S_ij = τ Q_i K_jᵀ, (Br, Bc); −∞ where the mask hides a key (and outside the ragged blocks)
        // line 11: P_ij = exp(S_ij − L_i); a row that sees no key has L_i = −∞ and is shifted by 0 instead (P = 0)
        for (int e = tid; e < BR * BC; e += NTHREADS) {
            const int r = e / BC, c = e % BC;
            float s = NEG_INF;
            if (r < rows && c < cols && !(causal && c0 + c > r0 + r + shift)) {
                s = 0.f;
                for (int k = 0; k < HEAD_DIM; ++k) s += Q_i[r * HEAD_DIM + k] * K_j[c * HEAD_DIM + k];
                s *= scale;
            }
            const float L_r = r < rows && L_i[r] != NEG_INF ? L_i[r] : 0.f;
            P_ij[e] = expf(s - L_r);
        }
        __syncthreads();
        // line 12: dV_j ← dV_j + P_ijᵀ dO_i, (Bc, d)
        for (int e = tid; e < cols * HEAD_DIM; e += NTHREADS) {
            const int c = e / HEAD_DIM, k = e % HEAD_DIM;
            float acc = 0.f;
            for (int r = 0; r < rows; ++r) acc += P_ij[r * BC + c] * dO_i[r * HEAD_DIM + k];
            dV_j[e] += acc;
        }
        // line 13: dP_ij = dO_i V_jᵀ, (Br, Bc)
        for (int e = tid; e < BR * BC; e += NTHREADS) {
            const int r = e / BC, c = e % BC;
            float acc = 0.f;
            if (r < rows && c < cols)
                for (int k = 0; k < HEAD_DIM; ++k) acc += dO_i[r * HEAD_DIM + k] * V_j[c * HEAD_DIM + k];
            dS_ij[e] = acc;
        }
        __syncthreads();
        // line 14: dS_ij = P_ij ∘ (dP_ij − D_i)
        for (int e = tid; e < BR * BC; e += NTHREADS) {
            const int r = e / BC;
            dS_ij[e] = r < rows ? P_ij[e] * (dS_ij[e] - D_i[r]) : 0.f;
        }
        __syncthreads();
        // line 15: dQ_i ← dQ_i + τ dS_ij K_j, (Br, d): added into HBM atomically (other blocks update dQ_i too)
        for (int e = tid; e < rows * HEAD_DIM; e += NTHREADS) {
            const int r = e / HEAD_DIM, k = e % HEAD_DIM;
            float acc = 0.f;
            for (int c = 0; c < cols; ++c) acc += dS_ij[r * BC + c] * K_j[c * HEAD_DIM + k];
            atomicAdd(dQacc + (bh * N + r0) * HEAD_DIM + e, scale * acc);
        }
        // line 16: dK_j ← dK_j + τ dS_ijᵀ Q_i, (Bc, d)
        for (int e = tid; e < cols * HEAD_DIM; e += NTHREADS) {
            const int c = e / HEAD_DIM, k = e % HEAD_DIM;
            float acc = 0.f;
            for (int r = 0; r < rows; ++r) acc += dS_ij[r * BC + c] * Q_i[r * HEAD_DIM + k];
            dK_j[e] += scale * acc;
        }
    }
    __syncthreads();
    // line 18: write dK_j, dV_j to HBM
    for (int e = tid; e < cols * HEAD_DIM; e += NTHREADS) {
        dK[(bh * Nk + c0) * HEAD_DIM + e] = from_float(dK_j[e]);
        dV[(bh * Nk + c0) * HEAD_DIM + e] = from_float(dV_j[e]);
    }
}
