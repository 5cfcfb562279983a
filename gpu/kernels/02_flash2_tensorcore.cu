// 02_flash2_tensorcore.cu (rung 2, "v2"): FlashAttention-2 forward on the tensor cores (fp16/bf16 in HBM, fp32 accumulate).
//
// 2026-11-29 (gpu/NOTES.md run 56): a Q block none of whose rows sees a key (N > Nk) loads nothing; L2 → SM bytes
// = the simulator's at N 1536, Nk 512 causal (rungs 2, 3; memcheck and racecheck clean).
//
// Changed from rung 1 (01_flash2_readable.cu), the same algorithm:
//  - S_ij = Q_i K_jᵀ and O_i += P̃_ij V_j run on the tensor cores: mma.sync.m16n8k16 through inline PTX,
//    operands loaded from shared memory with ldmatrix (.trans for V_j, whose rows are keys).
//  - Q_i is split across warps as FlashAttention-2 does: each warp owns 16·M_TILES rows of Q_i and sees
//    all of K_j and V_j, so a row's max and sum never leave its warp (4 lanes share a row: two shuffles).
//  - S_ij, P̃_ij, O_i, m_i, ℓ_i live in registers, not in shared memory; P̃_ij goes from the S
//    accumulators straight into the A operand of the second MMA.
//  - K_j, V_j arrive by cp.async into two shared-memory stages: block j + 1 is in flight while block j
//    is computed (one __syncthreads per K/V block).
//  - exp2 with the softmax scale folded in: e^{scale·(s − m)} = 2^{s·(scale·log2 e) − m·(scale·log2 e)},
//    one FFMA and one ex2.approx per element.
//  - causal: K/V blocks no row of Q_i sees are skipped (not loaded); the mask is applied only to the
//    blocks on the diagonal; Q blocks are scheduled longest first.
//  - O_i is staged through shared memory so that HBM sees whole 16-byte stores.
//
// Measured (NVIDIA H100 80GB HBM3, PyTorch 2.11 SDPA flash backend beside it; every run in gpu/NOTES.md):
//  - `flashsim bench gpu` (16k tokens per batch, hidden 2048): 258 to 328 TFLOP/s without mask and 165 to
//    304 causal, 0.90 to 1.18× SDPA; N ≥ 2048: 0.91 to 1.09×, median 1.00×. Standard attention: 2.2 to 15.5× slower.
//  - Tilings tried at N = 4096 (fp16, full / causal TFLOP/s): 8 warps × 16 rows, Bc 64: d64 279 / 249, d128 275 / 251;
//    4 warps × 32 rows, Bc 64, Q_i fragments in registers: d64 305 / 270 (default for d ≤ 64); the same at d128
//    cannot keep Q_i in registers (the O accumulators take 128 per thread), so Q_i's fragments are re-read from
//    shared memory: Bc 64 287 / 250, Bc 32 322 / 273 (default for d > 64), Bc 16 252 / 216; Br 64: d64 276 / 244.
//  - XOR-swizzled shared-memory rows (SWIZZLE = 1) instead of 16-byte padding: L2 → SM bytes drop from 1.500× to
//    exactly 1.000× of what the kernel asks for (ncu l1tex__m_xbar2l1tex_read_bytes), yet the kernel is slower
//    (d64 302 vs 311, d128 269 vs 318 TFLOP/s), probably because each ldmatrix address then needs its own XOR
//    where padding folds into an immediate offset, and at d = 128 the kernel already sits at 255 registers.
//    The kernel is compute-bound, so the extra L2 traffic costs little. Padding stays the default;
//    `flashsim compare` measures both.
//  - Failure: the first build did not compile under NVRTC (INFINITY is a host-header macro); NEG_INF replaces it.
//  - compute-sanitizer memcheck and racecheck: clean at ragged sizes (gpu.lab.harness --smoke), both layouts.
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

// Q: (batch·heads, N, HEAD_DIM), K and V: (batch·heads, Nk, HEAD_DIM), O: like Q, L: (batch·heads, N).
// Grid: (Tr, batch·heads), NTHREADS threads, (Br + 4·Bc)·SROW·2 bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
flash2_v2_fwd(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
              elem_t* __restrict__ O, float* __restrict__ L, int N, int Nk, float scale_log2, int causal)
{
    extern __shared__ __align__(16) elem_t smem[];
    elem_t* sQ = smem;                // SRAM: Q_i, (Br, SROW); each warp's rows later stage its O_i rows
    elem_t* sK = sQ + BR * SROW;      // SRAM: K_j, two stages of (Bc, SROW)
    elem_t* sV = sK + 2 * BC * SROW;  // SRAM: V_j, two stages of (Bc, SROW)

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // fragment coordinates: this lane holds rows g, g + 8 and columns 2t, 2t + 1
    const int i = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    const int r0 = i * BR;
    const int wrow = warp * 16 * M_TILES;  // this warp's first row in Q_i
    const int shift = Nk - N;              // causal: query r sees key c iff c ≤ r + shift
    const size_t bh = blockIdx.y;
    const elem_t* Q_hbm = Q + bh * N * HEAD_DIM;
    const elem_t* K_hbm = K + bh * Nk * HEAD_DIM;
    const elem_t* V_hbm = V + bh * Nk * HEAD_DIM;

    // K/V blocks read: all Tc of them, or (causal) up to the last one that row min(r0 + Br, N) − 1 sees
    int Tc = (Nk + BC - 1) / BC;
    if (causal) {
        const int last_key = min(r0 + BR, N) - 1 + shift;
        Tc = last_key < 0 ? 0 : min(Tc, last_key / BC + 1);
    }

    // line 4: load Q_i from HBM to SRAM; line 7 for j = 0: K_0, V_0 (one cp.async group); none of them where no row
    // of Q_i sees a key (Tc = 0, N > Nk: O_i = 0 and L_i = −∞ are written alone, as FlashAttention-2 does)
    if (Tc > 0) {
        load_tile<BR>(sQ, Q_hbm, r0, N, tid);
        load_tile<BC>(sK, K_hbm, 0, Nk, tid);
        load_tile<BC>(sV, V_hbm, 0, Nk, tid);
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

    for (int j = 0; j < Tc; ++j) {
        const elem_t* K_j = sK + (j & 1) * BC * SROW;
        const elem_t* V_j = sV + (j & 1) * BC * SROW;
        cp_async_wait_all();
        __syncthreads();  // K_j, V_j (and Q_i) are in SRAM; every warp is done with block j − 1's stage
        // line 7 for j + 1: start loading K_j+1, V_j+1 into the other stage while block j is computed
        if (j + 1 < Tc) {
            load_tile<BC>(sK + ((j + 1) & 1) * BC * SROW, K_hbm, (j + 1) * BC, Nk, tid);
            load_tile<BC>(sV + ((j + 1) & 1) * BC * SROW, V_hbm, (j + 1) * BC, Nk, tid);
        }
        cp_async_commit();
#if Q_IN_REGS
        if (j == 0) {
#pragma unroll
            for (int mt = 0; mt < M_TILES; ++mt)
#pragma unroll
                for (int kk = 0; kk < KT_D; ++kk)
                    ldmatrix_x4(q[mt][kk], smem_u32(sQ + at(wrow + mt * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8)));
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
                ldmatrix_x4(a[mt], smem_u32(sQ + at(wrow + mt * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8)));
#endif
            }
#pragma unroll
            for (int np = 0; np < NT_S / 2; ++np) {
                u32 b[4];  // K_j rows np·16 … np·16 + 15, columns kk·16 … kk·16 + 15: B fragments of two n-tiles
                ldmatrix_x4(b, smem_u32(K_j + at(np * 16 + (lane & 7) + (lane >> 4) * 8, kk * 16 + ((lane >> 3) & 1) * 8)));
#pragma unroll
                for (int mt = 0; mt < M_TILES; ++mt) {
                    mma_16816(s[mt][2 * np], a[mt], b[0], b[1]);
                    mma_16816(s[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }

        // keys past Nk (ragged last block) and, causal, keys c > r + shift get −∞; only diagonal blocks need it
        const int c0 = j * BC;
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
                const float m_scaled = m_new == NEG_INF ? 0.f : m_new * scale_log2;
                const float alpha = exp2_approx(m[mt][h] * scale_log2 - m_scaled);
                m[mt][h] = m_new;
                float rowsum = 0.f;
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int e = 2 * h; e < 2 * h + 2; ++e) {
                        s[mt][nt][e] = exp2_approx(fmaf(s[mt][nt][e], scale_log2, -m_scaled));
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
                ldmatrix_x4_trans(b, smem_u32(V_j + at(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, np * 16 + (lane >> 4) * 8)));
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
                L[bh * N + r0 + row] = l_row == 0.f ? NEG_INF : (m[mt][h] * scale_log2 + log2f(l_row)) * LN2;
        }
    __syncwarp();
    for (int chunk = lane; chunk < 16 * M_TILES * (HEAD_DIM / 8); chunk += 32) {
        const int row = wrow + chunk / (HEAD_DIM / 8), k = (chunk % (HEAD_DIM / 8)) * 8;
        if (r0 + row < N)
            *reinterpret_cast<uint4*>(O + (bh * N + r0 + row) * HEAD_DIM + k) = *reinterpret_cast<const uint4*>(sO + at(row, k));
    }
}
