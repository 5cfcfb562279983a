// 03_flash2_lane_offsets.cu (rung 3, "v3"): rung 2 with every ldmatrix address computed once per lane.
//
// 2026-11-29 (gpu/NOTES.md run 56): a Q block none of whose rows sees a key (N > Nk) loads nothing; L2 → SM bytes
// = the simulator's at N 1536, Nk 512 causal (rungs 2, 3; memcheck and racecheck clean).
//
// Changed from rung 2 (02_flash2_tensorcore.cu), the same algorithm and tiling options:
//  - ldmatrix addresses. Rung 2 computes each one from (row, column) through at() and a generic-to-shared
//    conversion; ptxas keeps many of them alive across the unrolled loops, and at d = 128 the kernel sits at
//    255 registers and spills. Here each lane computes, once, the byte offset of its row and 16-byte piece in
//    each operand's tile (Q_i, K_j, V_j); each ldmatrix then adds compile-time offsets for the k-step and the
//    n-tile (an immediate in the instruction) and, for K_j and V_j, the stage's base address.
//  - swizzled rows (SWIZZLE = 1) the same way: the 16-byte piece at (R + r, C + c) of a tile with R a multiple
//    of 8 and C of 16 sits at row R + r, piece (C/8 + c/8) XOR (r mod 8) = (C/8) XOR (c/8 XOR r mod 8): one XOR
//    of the lane's part with a compile-time constant per ldmatrix, not at()'s integer arithmetic.
//
// Measured (NVIDIA H100 80GB HBM3, gpu/NOTES.md runs 8–10; fp16, N = 4096, TFLOP/s full / causal, the same session):
//  - d = 64, 4 warps × 32 rows, Bc 64: rung 2 294.9 / 281.2 and 294.3 / 263.3, rung 3 318.0 / 294.1 and 328.9 / 281.0
//    (runs 8, 9); swizzled rows 310.2 / 282.1 and 302.3 / 273.7.
//  - d = 128, Q_i from shared memory: rung 2 (Bc 32) 303.4 / 276.9 and 304.7 / 256.1; rung 3 Bc 32 318.0 / 277.7 and
//    310.2 / 267.1, Bc 48 342.4 / 288.7 (run 9: the default for d > 64), Bc 64 295.9 / 242.3 and 300.2 / 244.3,
//    swizzled Bc 32 298.6 / 252.7 and 292.4 / 256.9; 8 warps × 16 rows, Bc 64, Q_i in registers 278.9 / 241.2 and
//    271.5 / 234.3. Bc 48 was not tried on rung 2 in these runs (run 3 measured 311.9 / 270.5 for it).
//  - ptxas reports the same registers and spills as rung 2 (d = 128, Bc 32: 255 registers, 12 bytes spilled; d = 64:
//    251), so the gain is not registers; fewer address instructions is our reading, not checked in the SASS.
//  - `flashsim bench gpu` (run 10, the public call with its defaults): 0.82 to 1.19× SDPA flash over 48 shapes, at or
//    above it on 33; d = 64 median 1.10×, d = 128 median 1.00×, below 1.0 mostly at d = 128, N ≤ 2048 (0.88 to 0.97×).
//  - compute-sanitizer memcheck and racecheck: clean at ragged sizes (gpu.lab.harness --smoke, both layouts; runs 9, 10).
//
// Variants (issue 25): as rung 6's (variants.cuh); rung 3 is their kernel off Hopper and at the head dims rung 6
// does not take. Correct at d = 64 and 72 (run 31); not timed with them.
//
// Injected #defines: HEAD_DIM (row length of Q, K, V, O in HBM: d padded to 8), D_MMA (d padded to 16),
// NWARPS, M_TILES (16-row MMA tiles per warp), BC (Bc, a multiple of 16), Q_IN_REGS, STORAGE (1 fp16, 2 bf16),
// MIN_BLOCKS (thread blocks per SM the register allocation must allow), SWIZZLE (shared-memory layout).

#define BR (16 * M_TILES * NWARPS)  // Br: query rows per thread block
#define NTHREADS (32 * NWARPS)
#if SWIZZLE
#define SROW (((D_MMA + 63) / 64) * 64)  // shared-memory row stride in elements: whole 128-byte lines
#else
#define SROW (D_MMA + 8)  // shared-memory row stride in elements: +16 bytes puts ldmatrix's 8 rows in 8 bank groups
#endif
#define CHUNKS (D_MMA / 8)  // 16-byte chunks in a shared-memory row
#define KT_D (D_MMA / 16)   // k-steps of Q_i K_jᵀ
#define NT_S (BC / 8)       // 8-key n-tiles of S_ij
#define KT_P (BC / 16)      // k-steps of P̃_ij V_j
#define NT_O (D_MMA / 8)    // 8-column n-tiles of O_i

#include "common.cuh"  // NEG_INF, LN2, cp.async, ldmatrix, mma, pack2, exp2_approx, at, load_tile
#include "variants.cuh"  // GQA, window, ALiBi, softcap, packed sequences: only what the launcher's #defines ask for
#ifndef VARIANT_PARAMS
#define VARIANT_PARAMS
#endif

// The SRAM byte offset of element (R + r, C + c) of a tile: R a multiple of 8 and C of 16, known at compile time;
// r, c (c = 0 or 8) this lane's, folded once into `lane` by lane_offset(r, c)
struct LaneOffset {
    u32 row;    // r · SROW · 2
    u32 piece;  // the 16-byte piece within the row: c · 2, or swizzled (c/8 XOR r mod 8) · 16
};
__device__ __forceinline__ LaneOffset lane_offset(int r, int c) {
#if SWIZZLE
    return {(u32)(r * SROW * 2), (u32)((((c >> 3) ^ r) & 7) << 4)};
#else
    return {(u32)(r * SROW * 2), (u32)(c * 2)};
#endif
}
__device__ __forceinline__ u32 offset(LaneOffset lane, int R, int C) {
#if SWIZZLE
    return lane.row + R * SROW * 2 + ((C * 2) ^ lane.piece);
#else
    return lane.row + R * SROW * 2 + C * 2 + lane.piece;
#endif
}

// Q: (batch·heads, N, HEAD_DIM), K and V: (batch·heads, Nk, HEAD_DIM), O: like Q, L: (batch·heads, N).
// Grid: (Tr, batch·heads), NTHREADS threads, (Br + 4·Bc)·SROW·2 bytes of dynamic shared memory. VARIANTS: K, V
// have batch·heads / group planes; VARLEN: Q, O (total_q, Hq, HEAD_DIM), K, V (total_k, Hkv, HEAD_DIM), L
// (Hq, total_q), grid (Tr of the longest sequence, Hq, B).
extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
flash2_v3_fwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
              elem_t* __restrict__ O, float* __restrict__ L, int N, int Nk, float scale_log2, int causal VARIANT_PARAMS)
{
    extern __shared__ __align__(16) elem_t smem[];
    elem_t* sQ = smem;                // SRAM: Q_i, (Br, SROW); each warp's rows later stage its O_i rows
    elem_t* sK = sQ + BR * SROW;      // SRAM: K_j, two stages of (Bc, SROW)
    elem_t* sV = sK + 2 * BC * SROW;  // SRAM: V_j, two stages of (Bc, SROW)

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // fragment coordinates: this lane holds rows g, g + 8 and columns 2t, 2t + 1
    const int i = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int r0 = i * BR;
#if VARIANTS
    const Seq sq = sequence(N, Nk, HEAD_DIM, cu_q, cu_k, group, heads);
    N = sq.N, Nk = sq.Nk;
    if (r0 >= N) return;  // VARLEN: this sequence is shorter than the longest
#else
    const Seq sq = plain_seq(N, Nk, blockIdx.y, HEAD_DIM);
#endif
    const int wrow = warp * 16 * M_TILES;  // this warp's first row in Q_i
    const int shift = Nk - N;              // causal: query r sees key c iff c ≤ r + shift
    const u32 sQ_u32 = smem_u32(sQ), sK_u32 = smem_u32(sK), sV_u32 = smem_u32(sV);
    const LaneOffset a_lane = lane_offset(wrow + (lane & 15), (lane >> 4) * 8);            // A: Q_i's 16 rows
    const LaneOffset b_lane = lane_offset((lane & 7) + (lane >> 4) * 8, ((lane >> 3) & 1) * 8);  // B: K_j, 2 n-tiles
    const LaneOffset t_lane = lane_offset((lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8);  // B: V_j, transposed
    const elem_t* Q_hbm = Q + sq.q_at;
    const elem_t* K_hbm = K + sq.kv_at;
    const elem_t* V_hbm = V + sq.kv_at;

    // K/V blocks read: j0 … Tc − 1; all of them, or (causal) up to the last one that row min(r0 + Br, N) − 1 sees,
    // or (VARIANTS) the window's band, causal folded in
    int j0 = 0, Tc = (Nk + BC - 1) / BC;
#if VARIANTS
    seen_blocks(j0, Tc, r0, min(r0 + BR, N) - 1, Nk, shift, left, right);
    const Band band = {Nk, shift, left, right, scale_log2, cap, 1.f / cap, ALIBI ? slopes[sq.slope] : 0.f};
#else
    if (causal) {
        const int last_key = min(r0 + BR, N) - 1 + shift;
        Tc = last_key < 0 ? 0 : min(Tc, last_key / BC + 1);
    }
#endif
    const float softmax_scale = SCORED ? 1.f : scale_log2;  // SCORED: scores in base 2 already

    // line 4: load Q_i from HBM to SRAM; line 7 for j = j0: K_j0, V_j0 (one cp.async group); none of them where no
    // row of Q_i sees a key (Tc = j0, N > Nk: O_i = 0 and L_i = −∞ are written alone, as FlashAttention-2 does)
    if (Tc > j0) {
        load_tile<BR>(sQ, Q_hbm, r0, N, tid, sq.q_stride);
        load_tile<BC>(sK + (j0 & 1) * BC * SROW, K_hbm, j0 * BC, Nk, tid, sq.kv_stride);
        load_tile<BC>(sV + (j0 & 1) * BC * SROW, V_hbm, j0 * BC, Nk, tid, sq.kv_stride);
    }
    cp_async_commit();

    // line 5: O_i = 0, ℓ_i = 0, m_i = −∞, in registers: (16·M_TILES, D_MMA) of O_i per warp, 2 rows per lane per tile
    float o[M_TILES][NT_O][4];
    float m[M_TILES][2], l[M_TILES][2];
#pragma unroll
    for (int mt = 0; mt < M_TILES; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT_O; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][nt][e] = 0.f;
        m[mt][0] = m[mt][1] = NEG_INF;
        l[mt][0] = l[mt][1] = 0.f;
    }
#if Q_IN_REGS
    u32 q[M_TILES][KT_D][4];  // registers: this warp's rows of Q_i as MMA A fragments, loaded at j = 0
#endif

    for (int j = j0; j < Tc; ++j) {
        const u32 K_j = sK_u32 + (j & 1) * BC * SROW * 2;  // SRAM byte addresses of this block's stage
        const u32 V_j = sV_u32 + (j & 1) * BC * SROW * 2;
        cp_async_wait_all();
        __syncthreads();  // K_j, V_j (and Q_i) are in SRAM; every warp is done with block j − 1's stage
        // line 7 for j + 1: start loading K_j+1, V_j+1 into the other stage while block j is computed
        if (j + 1 < Tc) {
            load_tile<BC>(sK + ((j + 1) & 1) * BC * SROW, K_hbm, (j + 1) * BC, Nk, tid, sq.kv_stride);
            load_tile<BC>(sV + ((j + 1) & 1) * BC * SROW, V_hbm, (j + 1) * BC, Nk, tid, sq.kv_stride);
        }
        cp_async_commit();
#if Q_IN_REGS
        if (j == j0) {
#pragma unroll
            for (int mt = 0; mt < M_TILES; ++mt)
#pragma unroll
                for (int kk = 0; kk < KT_D; ++kk)
                    ldmatrix_x4(q[mt][kk], sQ_u32 + offset(a_lane, mt * 16, kk * 16));
        }
#endif

        // line 8: S_ij = Q_i K_jᵀ, registers: (16·M_TILES, Bc) per warp, fp32
        float s[M_TILES][NT_S][4];
#pragma unroll
        for (int mt = 0; mt < M_TILES; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KT_D; ++kk) {
            u32 a[M_TILES][4];  // A fragments: this warp's rows of Q_i, columns kk·16 … kk·16 + 15
#pragma unroll
            for (int mt = 0; mt < M_TILES; ++mt) {
#if Q_IN_REGS
#pragma unroll
                for (int e = 0; e < 4; ++e) a[mt][e] = q[mt][kk][e];
#else
                ldmatrix_x4(a[mt], sQ_u32 + offset(a_lane, mt * 16, kk * 16));
#endif
            }
#pragma unroll
            for (int np = 0; np < NT_S / 2; ++np) {
                u32 b[4];  // K_j rows np·16 … np·16 + 15, columns kk·16 … kk·16 + 15: B fragments of two n-tiles
                ldmatrix_x4(b, K_j + offset(b_lane, np * 16, kk * 16));
#pragma unroll
                for (int mt = 0; mt < M_TILES; ++mt) {
                    mma_16816(s[mt][2 * np], a[mt], b[0], b[1]);
                    mma_16816(s[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }

        // keys past Nk (ragged last block) and, causal, keys c > r + shift get −∞; only diagonal blocks need it
        const int c0 = j * BC;
#if VARIANTS  // softcap and ALiBi (SCORED: to base 2 first), then −∞ for keys past Nk or outside the window
        const bool full = fully_seen(c0, r0, r0 + BR - 1, band.Nk, band.shift, band.left, band.right);
        if (SCORED || !full) {
#pragma unroll
            for (int mt = 0; mt < M_TILES; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int c = c0 + nt * 8 + 2 * t + (e & 1);
                        const int r = r0 + wrow + mt * 16 + g + (e >> 1) * 8;
#if SCORED
                        s[mt][nt][e] = scored(s[mt][nt][e], r, c, shift, band.scale_log2, band.cap, band.inv_cap, band.slope);
#endif
                        if (!full && !sees(r, c, band.Nk, band.shift, band.left, band.right)) s[mt][nt][e] = NEG_INF;
                    }
        }
#else
        if (c0 + BC > Nk || (causal && c0 + BC - 1 > r0 + shift)) {
#pragma unroll
            for (int mt = 0; mt < M_TILES; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int c = c0 + nt * 8 + 2 * t + (e & 1);
                        const int r = r0 + wrow + mt * 16 + g + (e >> 1) * 8;
                        if (c >= Nk || (causal && c > r + shift)) s[mt][nt][e] = NEG_INF;
                    }
        }
#endif

        // line 9: m_i^(j) = max(m_i^(j−1), rowmax(S_ij)), P̃_ij = exp(S_ij − m_i^(j)),
        //         ℓ_i^(j) = e^{m_i^(j−1) − m_i^(j)} ℓ_i^(j−1) + rowsum(P̃_ij), in base 2 with the scale folded in
        // line 10, first half: O_i ← diag(e^{m_i^(j−1) − m_i^(j)}) O_i
#pragma unroll
        for (int mt = 0; mt < M_TILES; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // h = 0: row g, h = 1: row g + 8
                float m_new = m[mt][h];
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt) m_new = fmaxf(m_new, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
                m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffff, m_new, 1));  // the 4 lanes of a row group
                m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffff, m_new, 2));
                // a row that has seen no key yet keeps m = −∞; shifting by 0 keeps P̃ = 2^−∞ = 0 instead of NaN
                const float m_scaled = m_new == NEG_INF ? 0.f : m_new * softmax_scale;
                const float alpha = exp2_approx(m[mt][h] * softmax_scale - m_scaled);
                m[mt][h] = m_new;
                float rowsum = 0.f;
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int e = 2 * h; e < 2 * h + 2; ++e) {
                        s[mt][nt][e] = exp2_approx(fmaf(s[mt][nt][e], softmax_scale, -m_scaled));
                        rowsum += s[mt][nt][e];
                    }
                l[mt][h] = alpha * l[mt][h] + rowsum;  // this lane's partial ℓ; the 4 partials are summed at line 12
#pragma unroll
                for (int nt = 0; nt < NT_O; ++nt) {
                    o[mt][nt][2 * h] *= alpha;
                    o[mt][nt][2 * h + 1] *= alpha;
                }
            }

        // line 10, second half: O_i += P̃_ij V_j; P̃_ij (rounded to fp16/bf16) is the A operand, V_j via ldmatrix.trans
#pragma unroll
        for (int kk = 0; kk < KT_P; ++kk) {
            u32 p[M_TILES][4];
#pragma unroll
            for (int mt = 0; mt < M_TILES; ++mt) accumulators_to_a(p[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < NT_O / 2; ++np) {
                u32 b[4];  // V_j rows kk·16 … kk·16 + 15, columns np·16 … np·16 + 15: B fragments of two n-tiles
                ldmatrix_x4_trans(b, V_j + offset(t_lane, kk * 16, np * 16));
#pragma unroll
                for (int mt = 0; mt < M_TILES; ++mt) {
                    mma_16816(o[mt][2 * np], p[mt], b[0], b[1]);
                    mma_16816(o[mt][2 * np + 1], p[mt], b[2], b[3]);
                }
            }
        }
    }
    cp_async_wait_all();
    __syncthreads();  // no copy into sQ is still in flight (Tc = 0 skips the loop) before warps reuse it for O_i

    // line 12: O_i = diag(ℓ_i)^−1 O_i; line 13: L_i = m_i + log ℓ_i (natural log; −∞ and zeros for a row that saw no key)
    // line 15: write L_i to HBM; O_i goes to this warp's own rows of sQ (SRAM), then line 14 writes it to HBM
    elem_t* sO = sQ;
#pragma unroll
    for (int mt = 0; mt < M_TILES; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float l_row = l[mt][h];
            l_row += __shfl_xor_sync(0xffffffff, l_row, 1);
            l_row += __shfl_xor_sync(0xffffffff, l_row, 2);
            const float inv = l_row == 0.f ? 0.f : 1.f / l_row;  // a NaN ℓ (NaN in the inputs) stays NaN
            const int row = wrow + mt * 16 + g + 8 * h;
#pragma unroll
            for (int nt = 0; nt < NT_O; ++nt)
                *reinterpret_cast<u32*>(sO + at(row, nt * 8 + 2 * t)) = pack2(o[mt][nt][2 * h] * inv, o[mt][nt][2 * h + 1] * inv);
            if (t == 0 && r0 + row < N)
                L[sq.l_at + (size_t)(r0 + row) * sq.l_stride] = l_row == 0.f ? NEG_INF : (m[mt][h] * softmax_scale + log2f(l_row)) * LN2;
        }
    __syncwarp();
    for (int chunk = lane; chunk < 16 * M_TILES * (HEAD_DIM / 8); chunk += 32) {
        const int row = wrow + chunk / (HEAD_DIM / 8), k = (chunk % (HEAD_DIM / 8)) * 8;
        if (r0 + row < N)
            *reinterpret_cast<uint4*>(O + sq.q_at + (size_t)(r0 + row) * sq.q_stride + k) = *reinterpret_cast<const uint4*>(sO + at(row, k));
    }
}
