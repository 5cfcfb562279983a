// 05_flash2_backward_tensorcore.cu (rung 5, backward "v2"): FlashAttention-2's backward pass on the tensor cores
// (fp16/bf16 in HBM, fp32 accumulate), the algorithm of rung 4 in the FlashAttention-2 form.
//
// Changed from rung 4 (04_flash2_backward_readable.cu):
//  - the five products of each tile pair run on the tensor cores (mma.sync.m16n8k16, operands by ldmatrix).
//    They are written transposed, keys as the MMA's rows: each warp owns 16 keys of K_j (Bc = 16 · NWARPS) and
//    computes S_ijᵀ = K_j Q_iᵀ, P_ijᵀ, dP_ijᵀ = V_j dO_iᵀ and dS_ijᵀ for them, so that dV_j += P_ijᵀ dO_i and
//    dK_j += dS_ijᵀ Q_i take P_ijᵀ and dS_ijᵀ straight from the accumulators as A operands (as rung 2 does with
//    P̃_ij V_j), and dK_j, dV_j stay in registers for the whole loop over Q blocks; HBM sees them once.
//  - dQ_i += τ dS_ij K_j needs all Bc keys of dS_ij: dS_ijᵀ goes to SRAM (fp16/bf16), and each warp computes a
//    16-row × (d / groups) piece of it (dS_ij by ldmatrix.trans from the stored dS_ijᵀ, K_j by ldmatrix.trans).
//  - dQ is accumulated with float32 atomics (red.global.add.v2.f32 on sm_90) into a float32 copy in HBM, which
//    backward_passes.cu zeroes before and rounds after, as in rung 4. Why atomics and not a second pass over K/V blocks per Q
//    block: the second pass would recompute S_ij, P_ij, dP_ij and dS_ij (two more products per tile, 7 instead
//    of 5), while the atomics cost L2 traffic only (Br · d · 4 bytes per tile pair) and the result differs from
//    run to run only in the order of float32 additions. FlashAttention-2 makes the same choice.
//  - Q_i, dO_i, L_i and D_i arrive by cp.async into two shared-memory stages: block i + 1 is in flight while
//    block i is computed. K_j, V_j stay in SRAM; their A fragments are re-read by ldmatrix for each Q block.
//  - causal: Q blocks none of whose rows see K_j are skipped (not loaded); the mask is applied only on tiles
//    that cross the diagonal or the ragged edges. Blocks of small j (the most Q blocks to visit) start first.
//
// Measured (NVIDIA H100 80GB HBM3, PyTorch 2.11 SDPA flash backend beside it; gpu/NOTES.md runs 8–10):
//  - Correct at its first run (run 8): every check by FlashAttention's criterion for dQ, dK, dV (d 32 … 128, fp16 and
//    bf16, ragged, causal, N ≠ Nk); compute-sanitizer memcheck and racecheck clean (runs 9, 10).
//  - `flashsim bench gpu --backward` (run 10, forward rung 3 + this kernel, through the public calls, FLOPs = 3.5 ×
//    forward): 118 to 273 TFLOP/s, 0.84 to 1.15× SDPA flash forward + backward (median 0.90× at d = 64, 0.92× at
//    d = 128; 0.84 to 0.95× for N ≥ 2048), 1.4 to 6.0× standard attention. Peak extra memory O(N): 12 MiB at
//    N = 1024 to 388 MiB at N = 32768 (batch 1, 16 heads, d 64), standard attention 100 MiB to 24 GiB, then OOM.
//  - Tilings tried (fp16, N = 4096, forward + backward TFLOP/s full / causal, runs 8 and 9): d = 64: 8 warps, Br 64
//    (the default) 229.0 / 214.9 and 236.1 / 210.6; 4 warps, Br 64, 2 blocks per SM 235.3 / 212.9 and 227.7 / 211.4;
//    8 warps, Br 32 220.5 / 197.4; 4 warps, Br 128 229.4 / 204.8; 8 warps, Br 128 237.7 / 210.9 (run 9). d = 128:
//    8 warps, Br 64 (the default) 255.5 / 231.4 and 243.3 / 232.1; 4 warps, Br 64 239.1 / 213.9; 8 warps, Br 32
//    244.9 / 206.1 and 243.6 / 216.1; 4 warps, Br 32, 2 blocks per SM 238.3 / 209.8. Differences under ~5% are noise.
//  - ptxas: 254 to 255 registers at d = 64 and 128 with Bc = 128 (8 bytes spilled at d = 128), so one block of 8
//    warps per SM. `flashsim compare --backward` (N = 2048, d = 64): the atomics add exactly the float32 dQ bytes
//    predicted (×1.000); L2 → SM reads are ×1.49 of the reads asked for, the padded shared-memory rows again.
//
// Variants (gpu/variants.py's #defines, variants.cuh; run 34: every test of tests/test_gpu_backward_variants.py
// passed, memcheck 0 errors, racecheck 0 hazards on two cases; not timed): GQA, the window, ALiBi, softcap and
// packed sequences, each compiled in only when asked for. The plain build computes as before; its code differs only
// in reading offsets and strides from KVSeq (ptxas, sm_90a: 255 registers, spills 16 → 8 bytes at d = 64, 8 → 0 at
// d = 128).
//  - GQA: the thread block of K/V block j of K/V head hkv loops over the g query heads that read it, one after the
//    other in the same Q-block pipeline, so that dK_j, dV_j sum the g heads' terms in registers (no atomics, the
//    same order on every run); dQ per query head as before. Grid (Tc, B·Hkv); packed: (Tc of the longest, Hkv, B).
//  - window (causal folded in): only the Q blocks some row of which sees a key of K_j are visited (seen_q_blocks,
//    the transpose of the forward's K/V block range), the mask only where a tile is not fully seen.
//  - S_ij as the forward scores it: softcap, then ALiBi, in base 2; P_ij = exp2(S_ij − L_i log2 e).
//  - softcap's chain rule: S = c·tanh(x/c) with x = τ q·k, so ∂S/∂x = 1 − tanh²(x/c), and the gradient w.r.t. x
//    is dS ∘ (1 − tanh²); tanh(x/c) is the capped score over c (in base 2: S·log2 e / (c·log2 e)), kept per
//    element from line 11 to line 14. ALiBi's bias does not depend on q or k: no term.
//
// Injected #defines: HEAD_DIM (row length in HBM: d padded to 8), D_MMA (d padded to 16), NWARPS (Bc = 16 · NWARPS),
// BR (Br, query rows per step, a multiple of 16), MIN_BLOCKS, STORAGE (1 fp16, 2 bf16).

#define BC (16 * NWARPS)      // Bc: keys per thread block, 16 per warp
#define NTHREADS (32 * NWARPS)
#define SROW (D_MMA + 8)      // SRAM row stride of K_j, V_j, Q_i, dO_i in elements: +16 bytes, no bank conflicts
#define SROW_DS (BR + 8)      // SRAM row stride of dS_ijᵀ (one row per key)
#define SWIZZLE 0
#define CHUNKS (D_MMA / 8)    // 16-byte chunks in a row
#define KT_D (D_MMA / 16)     // k-steps over d
#define NT_Q (BR / 8)         // 8-query n-tiles of S_ijᵀ and dP_ijᵀ
#define KT_Q (BR / 16)        // k-steps over the queries of Q_i
#define NP_D (D_MMA / 16)     // pairs of 8-column n-tiles of dK_j, dV_j, dQ_i
#define QM (BR / 16)          // 16-query m-tiles of dQ_i
#define DQ_GROUPS (NWARPS >= QM ? NWARPS / QM : 1)           // warps that share one m-tile of dQ_i
#define DQ_MT (QM > NWARPS ? QM / NWARPS : 1)                // m-tiles of dQ_i per warp
#define DQ_NP ((NP_D + DQ_GROUPS - 1) / DQ_GROUPS)           // n-tile pairs of dQ_i per warp, at most

#include "common.cuh"  // NEG_INF, LOG2E, cp.async, ldmatrix, mma, pack2, accumulators_to_a, atomics, load_tile
#include "variants.cuh"  // GQA, window, ALiBi, softcap, packed sequences: only what the launcher's #defines ask for
#ifndef VARIANT_PARAMS
#define VARIANT_PARAMS
#endif

// line 9 for Q block i: Q_i, dO_i (rows i·Br … of (N, HEAD_DIM) matrices, q_stride elements apart), L_i and D_i
// (rows d_stride apart) into one SRAM stage, zeros past N
__device__ __forceinline__ void load_q_block(elem_t* sQ, elem_t* sdO, float* sL, float* sD, const elem_t* Q_hbm,
                                             const elem_t* dO_hbm, const float* L_hbm, const float* D_hbm, int i,
                                             int N, int tid, int q_stride, int d_stride) {
    load_tile<BR>(sQ, Q_hbm, i * BR, N, tid, q_stride);
    load_tile<BR>(sdO, dO_hbm, i * BR, N, tid, q_stride);
    for (int r = tid; r < BR; r += NTHREADS) {
        const int row = i * BR + r;
        const bool inside = row < N;
        cp_async_4(sL + r, L_hbm + (inside ? row : 0), inside ? 4 : 0);
        cp_async_4(sD + r, D_hbm + (inside ? (size_t)row * d_stride : 0), inside ? 4 : 0);
    }
}

// Q, dO: (batch·heads, N, HEAD_DIM); K, V, dK, dV: (batch·heads, Nk, HEAD_DIM); L, D: (batch·heads, N) float32;
// dQacc: (batch·heads, N, HEAD_DIM) float32, zeroed. Grid: (Tc, batch·heads), NTHREADS threads,
// 2·(2·Bc·SROW + 4·Br·SROW + Bc·SROW_DS) + 16·Br bytes of dynamic shared memory. VARIANTS: K, V, dK, dV have
// batch·heads / group planes, grid (Tc, batch·heads / group); VARLEN: Q, dO, dQacc (total_q, Hq, ·), K, V, dK, dV
// (total_k, Hkv, HEAD_DIM), L (Hq, total_q), D (total_q, Hq), grid (Tc of the longest, Hkv, B).
extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
flash2_v2_bwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
              const elem_t* __restrict__ dO, const float* __restrict__ L, const float* __restrict__ D,
              float* __restrict__ dQacc, elem_t* __restrict__ dK, elem_t* __restrict__ dV, int N, int Nk, float scale,
              int causal VARIANT_PARAMS)
{
    extern __shared__ __align__(16) elem_t smem[];
    elem_t* sK = smem;                      // SRAM: K_j, (Bc, SROW); dK_j on its way out at the end
    elem_t* sV = sK + BC * SROW;            // SRAM: V_j, (Bc, SROW); dV_j on its way out at the end
    elem_t* sQ = sV + BC * SROW;            // SRAM: Q_i, two stages of (Br, SROW)
    elem_t* sdO = sQ + 2 * BR * SROW;       // SRAM: dO_i, two stages of (Br, SROW)
    elem_t* sdS = sdO + 2 * BR * SROW;      // SRAM: dS_ijᵀ, (Bc, SROW_DS)
    float* sL = reinterpret_cast<float*>(sdS + BC * SROW_DS);  // SRAM: L_i, two stages of (Br)
    float* sD = sL + 2 * BR;                                   // SRAM: D_i, two stages of (Br)

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // fragment coordinates: rows g, g + 8 and columns 2t, 2t + 1
    const int c0 = blockIdx.x * BC;
#if VARIANTS
    const KVSeq sq = kv_sequence(N, Nk, HEAD_DIM, cu_q, cu_k, group, heads);
    N = sq.N, Nk = sq.Nk;
    if (c0 >= Nk) return;  // VARLEN: this sequence has fewer keys than the longest
    const int G = group;   // query heads per K/V head
#else
    const KVSeq sq = plain_kv_seq(N, Nk, blockIdx.y, HEAD_DIM);
    constexpr int G = 1;
#endif
    const int wkey = warp * 16;  // this warp's first key in K_j
    const int shift = Nk - N;    // causal: query r sees key c iff c ≤ r + shift
    const float scale_log2 = scale * LOG2E;
    // ldmatrix addresses: the SRAM byte address of each tile, plus this lane's offset (which of the four 8×8 matrices
    // it points into, and which row), plus compile-time offsets for the k-step and n-tile
    const u32 sK_u32 = smem_u32(sK), sV_u32 = smem_u32(sV), sQ_u32 = smem_u32(sQ), sdO_u32 = smem_u32(sdO);
    const u32 sdS_u32 = smem_u32(sdS);
    const int lrow = (lane & 7) + (lane >> 4) * 8, lrow_t = (lane & 7) + ((lane >> 3) & 1) * 8;
    const u32 a_lane = ((wkey + (lane & 15)) * SROW + (lane >> 4) * 8) * 2;  // A: 16 rows, two 8-column halves
    const u32 b_lane = (lrow * SROW + ((lane >> 3) & 1) * 8) * 2;             // B: two n-tiles of 8 rows, k halves
    const u32 t_lane = (lrow_t * SROW + (lane >> 4) * 8) * 2;                 // B, transposed: 16 k-rows, two n-tiles
    const u32 ds_lane = (lrow * SROW_DS + ((lane >> 3) & 1) * 8) * 2;        // A from dS_ijᵀ, transposed

    // line 8's range: all Tr Q blocks, or (causal) from the one holding row c0 − shift, the first to see key c0,
    // or (VARIANTS) the window's, causal folded in; for each of the G query heads in turn: items n = u·blocks + i
    const int Tr = (N + BR - 1) / BR;
#if VARIANTS
    int i_first, i_end;
    seen_q_blocks(i_first, i_end, c0, N, Nk, shift, left, right);
#else
    const int i_first = causal ? max(0, c0 - shift) / BR : 0, i_end = Tr;
#endif
    const int blocks = max(0, i_end - i_first), items = G * blocks;
    // line 9 for item n: query head u = n / blocks of the group, Q block i_first + n % blocks
    auto load_item = [&](int n, int stage) {
        const int u = ITEM_HEAD(n, blocks);
        load_q_block(sQ + stage * BR * SROW, sdO + stage * BR * SROW, sL + stage * BR, sD + stage * BR,
                     Q + sq.q_at + u * sq.q_step, dO + sq.q_at + u * sq.q_step, L + sq.l_at + u * sq.l_step,
                     D + sq.d_at + u * sq.d_step, i_first + ITEM_BLOCK(n, blocks), N, tid, sq.q_stride, sq.d_stride);
    };

    // line 6: load K_j, V_j from HBM to SRAM, with the first Q block (one cp.async group)
    load_tile<BC>(sK, K + sq.kv_at, c0, Nk, tid, sq.kv_stride);
    load_tile<BC>(sV, V + sq.kv_at, c0, Nk, tid, sq.kv_stride);
    if (items > 0) load_item(0, 0);
    cp_async_commit();

    // line 7: dK_j = 0, dV_j = 0 in registers: this warp's 16 keys × D_MMA columns of each
    float dk[2 * NP_D][4], dv[2 * NP_D][4];
#pragma unroll
    for (int nt = 0; nt < 2 * NP_D; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk[nt][e] = dv[nt][e] = 0.f;

    for (int n = 0; n < items; ++n) {
        const int stage = n & 1;
        const int u = ITEM_HEAD(n, blocks), i = i_first + ITEM_BLOCK(n, blocks);  // query head u of the group, Q block i
        const int r0 = i * BR;
        float* dQ_hbm = dQacc + sq.q_at + u * sq.q_step;  // HBM: this head's float32 dQ rows, q_stride apart
        cp_async_wait_all();
        __syncthreads();  // Q_i, dO_i, L_i, D_i (and K_j, V_j) are in SRAM; every warp is done with item n − 1
        if (n + 1 < items) load_item(n + 1, stage ^ 1);  // item n + 1 lands while item n is computed
        cp_async_commit();
        const u32 Q_i = sQ_u32 + stage * BR * SROW * 2;  // byte addresses in SRAM of this block's stage
        const u32 dO_i = sdO_u32 + stage * BR * SROW * 2;
        const float* L_i = sL + stage * BR;
        const float* D_i = sD + stage * BR;

        // line 10: S_ijᵀ = K_j Q_iᵀ, registers: this warp's 16 keys × Br queries, fp32 (τ folded into line 11)
        float st[NT_Q][4];
#pragma unroll
        for (int nt = 0; nt < NT_Q; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) st[nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KT_D; ++kk) {
            u32 a[4];  // K_j rows wkey … wkey + 15, columns kk·16 … kk·16 + 15
            ldmatrix_x4(a, sK_u32 + a_lane + kk * 32);
#pragma unroll
            for (int np = 0; np < NT_Q / 2; ++np) {
                u32 b[4];  // Q_i rows np·16 … np·16 + 15 (two n-tiles of queries), columns kk·16 …
                ldmatrix_x4(b, Q_i + b_lane + np * 16 * SROW * 2 + kk * 32);
                mma_16816(st[2 * np], a, b[0], b[1]);
                mma_16816(st[2 * np + 1], a, b[2], b[3]);
            }
        }

        // line 11: P_ijᵀ = exp(τ S_ijᵀ − L_i), in base 2; 0 for keys past Nk, queries past N and hidden pairs
        // (a query that sees no key has L = −∞; all its pairs are hidden, so its +∞ is replaced, never used)
#if VARIANTS
        const bool edge = r0 + BR > N || !fully_seen(c0, r0, r0 + BR - 1, Nk, shift, left, right);
#if ALIBI
        const float slope = slopes[sq.slope + u];  // slope_h · log2 e
#endif
#if SOFTCAP
        float dcap[NT_Q][4];  // registers: 1 − tanh²(x/c) of each score, for line 14
        const float inv_cap = 1.f / cap;
#endif
#else
        const bool edge = c0 + BC > Nk || r0 + BR > N || (causal && c0 + BC - 1 > r0 + shift);
#endif
#pragma unroll
        for (int nt = 0; nt < NT_Q; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int qi = nt * 8 + 2 * t + (e & 1);  // the query's row in Q_i
                const int key = c0 + wkey + g + (e >> 1) * 8, query = r0 + qi;
#if SCORED  // the forward's scores in base 2: x·log2 e, softcapped, minus the ALiBi bias
                float s = st[nt][e] * scale_log2;
#if SOFTCAP
                s = softcap_log2(s, cap, inv_cap);
                dcap[nt][e] = 1.f - (s * inv_cap) * (s * inv_cap);  // tanh(x/c) = capped score / c
#endif
#if ALIBI
                s -= ALIBI_BIAS(slope, query, key, shift);
#endif
                float p = exp2_approx(s - L_i[qi] * LOG2E);
#else
                float p = exp2_approx(fmaf(st[nt][e], scale_log2, -L_i[qi] * LOG2E));
#endif
                if (edge) {
#if VARIANTS
                    if (query >= N || !sees(query, key, Nk, shift, left, right)) p = 0.f;
#else
                    if (key >= Nk || query >= N || (causal && key > query + shift)) p = 0.f;
#endif
                }
                st[nt][e] = p;
            }

        // line 12: dV_j ← dV_j + P_ijᵀ dO_i; P_ijᵀ (rounded to fp16/bf16) is the A operand, dO_i via ldmatrix.trans
#pragma unroll
        for (int kk = 0; kk < KT_Q; ++kk) {
            u32 a[4];
            accumulators_to_a(a, st[2 * kk], st[2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < NP_D; ++np) {
                u32 b[4];  // dO_i rows kk·16 … kk·16 + 15, columns np·16 … np·16 + 15
                ldmatrix_x4_trans(b, dO_i + t_lane + kk * 16 * SROW * 2 + np * 32);
                mma_16816(dv[2 * np], a, b[0], b[1]);
                mma_16816(dv[2 * np + 1], a, b[2], b[3]);
            }
        }

        // line 13: dP_ijᵀ = V_j dO_iᵀ, registers: 16 keys × Br queries, fp32
        float dpt[NT_Q][4];
#pragma unroll
        for (int nt = 0; nt < NT_Q; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) dpt[nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KT_D; ++kk) {
            u32 a[4];  // V_j rows wkey … wkey + 15, columns kk·16 …
            ldmatrix_x4(a, sV_u32 + a_lane + kk * 32);
#pragma unroll
            for (int np = 0; np < NT_Q / 2; ++np) {
                u32 b[4];  // dO_i rows np·16 … np·16 + 15, columns kk·16 …
                ldmatrix_x4(b, dO_i + b_lane + np * 16 * SROW * 2 + kk * 32);
                mma_16816(dpt[2 * np], a, b[0], b[1]);
                mma_16816(dpt[2 * np + 1], a, b[2], b[3]);
            }
        }

        // line 14: dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i), in place of dP_ijᵀ; then into SRAM (fp16/bf16) for line 15
#pragma unroll
        for (int nt = 0; nt < NT_Q; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                dpt[nt][e] = st[nt][e] * (dpt[nt][e] - D_i[nt * 8 + 2 * t + (e & 1)]);
#if SOFTCAP
                dpt[nt][e] *= dcap[nt][e];  // the chain rule through c·tanh(x/c): w.r.t. x = τ q·k
#endif
            }
            *reinterpret_cast<u32*>(sdS + (wkey + g) * SROW_DS + nt * 8 + 2 * t) = pack2(dpt[nt][0], dpt[nt][1]);
            *reinterpret_cast<u32*>(sdS + (wkey + g + 8) * SROW_DS + nt * 8 + 2 * t) = pack2(dpt[nt][2], dpt[nt][3]);
        }

        // line 16: dK_j ← dK_j + dS_ijᵀ Q_i (τ applied once, at line 18); Q_i via ldmatrix.trans
#pragma unroll
        for (int kk = 0; kk < KT_Q; ++kk) {
            u32 a[4];
            accumulators_to_a(a, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < NP_D; ++np) {
                u32 b[4];  // Q_i rows kk·16 … kk·16 + 15, columns np·16 …
                ldmatrix_x4_trans(b, Q_i + t_lane + kk * 16 * SROW * 2 + np * 32);
                mma_16816(dk[2 * np], a, b[0], b[1]);
                mma_16816(dk[2 * np + 1], a, b[2], b[3]);
            }
        }
        __syncthreads();  // all Bc rows of dS_ijᵀ are in SRAM

        // line 15: dQ_i ← dQ_i + τ dS_ij K_j: this warp's m-tiles (16 queries) of dQ_i and its share of the column
        // pairs, added into HBM with float32 atomics
        const int cols = NWARPS >= QM ? warp % DQ_GROUPS : 0;
#pragma unroll
        for (int mi = 0; mi < DQ_MT; ++mi) {
            const int mq = NWARPS >= QM ? warp / DQ_GROUPS : warp * DQ_MT + mi;  // the m-tile: queries mq·16 …
            float acc[DQ_NP][2][4];
#pragma unroll
            for (int pi = 0; pi < DQ_NP; ++pi)
#pragma unroll
                for (int e = 0; e < 8; ++e) acc[pi][e / 4][e % 4] = 0.f;
#pragma unroll
            for (int kk = 0; kk < BC / 16; ++kk) {
                u32 a[4];  // dS_ij rows mq·16 … mq·16 + 15, keys kk·16 …: the stored dS_ijᵀ, transposed by ldmatrix
                ldmatrix_x4_trans(a, sdS_u32 + ds_lane + kk * 16 * SROW_DS * 2 + mq * 32);
#pragma unroll
                for (int pi = 0; pi < DQ_NP; ++pi) {
                    const int np = cols + pi * DQ_GROUPS;
                    if (np < NP_D) {
                        u32 b[4];  // K_j rows kk·16 … kk·16 + 15, columns np·16 …
                        ldmatrix_x4_trans(b, sK_u32 + t_lane + kk * 16 * SROW * 2 + np * 32);
                        mma_16816(acc[pi][0], a, b[0], b[1]);
                        mma_16816(acc[pi][1], a, b[2], b[3]);
                    }
                }
            }
#pragma unroll
            for (int pi = 0; pi < DQ_NP; ++pi) {
                const int np = cols + pi * DQ_GROUPS;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int col = np * 16 + h * 8 + 2 * t;
                    if (np < NP_D && col < HEAD_DIM) {
                        const int q = r0 + mq * 16 + g;
                        if (q < N) atomic_add_f32x2(dQ_hbm + (size_t)q * sq.q_stride + col, scale * acc[pi][h][0], scale * acc[pi][h][1]);
                        if (q + 8 < N) atomic_add_f32x2(dQ_hbm + (size_t)(q + 8) * sq.q_stride + col, scale * acc[pi][h][2], scale * acc[pi][h][3]);
                    }
                }
            }
        }
    }
    cp_async_wait_all();
    __syncthreads();  // no copy is in flight and every warp is done with K_j, V_j: their SRAM stages dK_j, dV_j

    // line 18: write dK_j = τ dK_j and dV_j to HBM, through this warp's own rows of sK, sV (16-byte stores)
#pragma unroll
    for (int nt = 0; nt < 2 * NP_D; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = wkey + g + 8 * h;
            *reinterpret_cast<u32*>(sK + row * SROW + nt * 8 + 2 * t) = pack2(scale * dk[nt][2 * h], scale * dk[nt][2 * h + 1]);
            *reinterpret_cast<u32*>(sV + row * SROW + nt * 8 + 2 * t) = pack2(dv[nt][2 * h], dv[nt][2 * h + 1]);
        }
    __syncwarp();
    for (int chunk = lane; chunk < 16 * (HEAD_DIM / 8); chunk += 32) {
        const int row = wkey + chunk / (HEAD_DIM / 8), k = (chunk % (HEAD_DIM / 8)) * 8;
        if (c0 + row < Nk) {
            const size_t at_hbm = sq.kv_at + (size_t)(c0 + row) * sq.kv_stride + k;
            *reinterpret_cast<uint4*>(dK + at_hbm) = *reinterpret_cast<const uint4*>(sK + row * SROW + k);
            *reinterpret_cast<uint4*>(dV + at_hbm) = *reinterpret_cast<const uint4*>(sV + row * SROW + k);
        }
    }
}
