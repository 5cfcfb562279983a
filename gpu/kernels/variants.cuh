// variants.cuh: what the forward rungs 3 and 6 and the backward rungs 5 and 7 add to S_ij
// and to their loops for today's LLM variants, each compiled in only when gpu/variants.py's launcher injects its
// #define (a build without them is the plain kernel). The backward's thread block owns a K/V block of K/V head hkv and visits the Q blocks of its g
// query heads (KVSeq, seen_q_blocks); VARLEN's grid is (Tc of the longest, Hkv, B) there:
//   VARIANTS  the variant arguments (VARIANT_PARAMS) and the sequence geometry below; GQA and the window need
//             nothing more: query head h reads K/V head h / group, and the window (causal folded in: right ≤ 0)
//             bounds the K/V blocks read (j0 … Tc − 1) as causal did
//   VARLEN    packed sequences: grid (Tr of the longest, Hq, B) (rung 6 persistent: its walk over the real
//             tiles of each sequence, gpu/kernels/06_flash2_wgmma_tma.cu), Q and O (total_q, Hq, HEAD_DIM), K and V
//             (total_k, Hkv, HEAD_DIM), L (Hq, total_q) (FlashAttention's: a head's rows contiguous, so that L_i
//             is written in whole 32-byte sectors; (total_q, Hq) put each 4-byte L in a sector of its own, writes
//             ×1.3 of the prediction at L2); sequence b is rows cu_q[b] … cu_q[b + 1] − 1
//   SOFTCAP   S ← c·tanh(S/c), on τ Q_i K_jᵀ, before ALiBi and the mask (the simulator's sim/algorithms/scores.py)
//   ALIBI     S ← S − slope_h·|p + Nk − N − c| (bottom-right, FlashAttention's sign)
// With SOFTCAP or ALIBI the scores are taken to base-2 units first (· τ log2 e) and the softmax runs at scale 1;
// the host passes c and the slopes already times log2 e.

#ifndef VARIANTS
#define VARIANTS 0
#endif
#ifndef VARLEN
#define VARLEN 0
#endif
#ifndef SOFTCAP
#define SOFTCAP 0
#endif
#ifndef ALIBI
#define ALIBI 0
#endif
#define SCORED (SOFTCAP || ALIBI)  // the scores change before the softmax: it runs at scale 1 in base 2

#if VARIANTS
// slopes: (B, Hq) float32 · log2 e (ALIBI); cu_q, cu_k: (B + 1) int32 (VARLEN); left, right: the window's sides,
// UNBOUNDED for none (causal: right = 0); cap: c · log2 e (SOFTCAP); group: Hq / Hkv; heads: Hq
#define VARIANT_PARAMS , const float* __restrict__ slopes, const int* __restrict__ cu_q, \
    const int* __restrict__ cu_k, int left, int right, float cap, int group, int heads
#endif

// Where one thread block's sequence and head sit: rows of Q (and O) and of K, V as element offsets and strides
// (the pointer rungs), as (row, plane) coordinates of the tensor maps (rung 6), and its L and slope.
struct Seq {
    int N, Nk;              // this sequence's query rows and keys
    int q_row, q_plane;     // row 0 of Q_b in Q's map: (row, plane)
    int kv_row, kv_plane;   // row 0 of K_b, V_b in their maps
    size_t q_at, kv_at;     // element offsets of row 0 of Q_b (and O_b), of K_b and V_b
    int q_stride, kv_stride;  // elements from one row to the next
    size_t l_at;            // L's offset of row 0; rows are l_stride apart
    int l_stride;
    int slope;              // this head's index in slopes (b · Hq + h)
};

// The plain kernel's geometry: plane bh of (batch·heads, N, D) tensors
__device__ __forceinline__ Seq plain_seq(int N, int Nk, int bh, int D) {
    return {N, Nk, 0, bh, 0, bh, (size_t)bh * N * D, (size_t)bh * Nk * D, D, D, (size_t)bh * N, 1, bh};
}

// The backward's view (rung 5): one thread block per K/V block of K/V head hkv, which visits the g query heads
// hkv·g … hkv·g + g − 1 that read it, one after the other: where the first one's Q (dO, dQ), L, D and slope sit,
// and how far the next one is (q_step, l_step, d_step; slopes + 1). D is the pre-pass's, one float per row of O in
// O's order: (B·Hq, N), or packed (total_q, Hq).
struct KVSeq {
    int N, Nk;                          // this sequence's query rows and keys
    size_t q_at, q_step; int q_stride;  // element offset of row 0 of the first head's Q_b (dO_b, dQ_b); rows apart
    size_t kv_at; int kv_stride;        // element offset of row 0 of K_b, V_b (dK_b, dV_b); rows apart
    size_t l_at, l_step;                // L's offset of row 0 (rows 1 apart)
    size_t d_at, d_step; int d_stride;  // D's offset of row 0; rows d_stride apart
    int slope;                          // the first head's index in slopes (b · Hq + h)
};

// The plain backward's geometry: plane bh of (batch·heads, N, D) tensors, one head per K/V head
__device__ __forceinline__ KVSeq plain_kv_seq(int N, int Nk, int bh, int D) {
    return {N, Nk, (size_t)bh * N * D, (size_t)N * D, D, (size_t)bh * Nk * D, D, (size_t)bh * N, (size_t)N,
            (size_t)bh * N, (size_t)N, 1, bh};
}

// The backward's walk: item `it` of a thread block's G query heads × `blocks` Q blocks, head-major: its head (0 …
// G − 1) and its Q block (from the first); without VARIANTS one head, and no division
#if VARIANTS
#define ITEM_HEAD(it, blocks) ((it) / (blocks))
#define ITEM_BLOCK(it, blocks) ((it) % (blocks))
#else
#define ITEM_HEAD(it, blocks) 0
#define ITEM_BLOCK(it, blocks) (it)
#endif

#if VARIANTS
#define UNBOUNDED (1 << 30)  // a window side without a bound (positions stay below 2^21: no overflow)

// head h of sequence b of a packed batch of B sequences: rows cu_q[b] … of Q (total_q, Hq, D), K/V head h / group
__device__ __forceinline__ Seq packed_sequence(int b, int h, int B, int D, const int* cu_q, const int* cu_k, int group,
                                               int heads) {
    const int hkv = h / group, q0 = cu_q[b], k0 = cu_k[b];
    const int kv_heads = heads / group;
    const size_t total_q = cu_q[B];
    return {cu_q[b + 1] - q0, cu_k[b + 1] - k0, q0, h, k0, hkv, ((size_t)q0 * heads + h) * D,
            ((size_t)k0 * kv_heads + hkv) * D, heads * D, kv_heads * D, h * total_q + q0, 1, b * heads + h};
}

// blockIdx.y is b·Hq + h (packed: h, and b is blockIdx.z); K/V head h / group of the same batch entry
__device__ __forceinline__ Seq sequence(int N, int Nk, int D, const int* cu_q, const int* cu_k, int group, int heads) {
#if VARLEN
    return packed_sequence(blockIdx.z, blockIdx.y, gridDim.z, D, cu_q, cu_k, group, heads);
#else
    Seq s = plain_seq(N, Nk, blockIdx.y, D);
    s.kv_plane = blockIdx.y / group;  // (b·Hq + h) / g = b·Hkv + h / g
    s.kv_at = (size_t)s.kv_plane * Nk * D;
    return s;
#endif
}

// blockIdx.y is b·Hkv + hkv (packed: hkv, and b is blockIdx.z): the backward's K/V head and its g query heads
__device__ __forceinline__ KVSeq kv_sequence(int N, int Nk, int D, const int* cu_q, const int* cu_k, int group, int heads) {
#if VARLEN
    const int b = blockIdx.z, hkv = blockIdx.y, h0 = hkv * group, q0 = cu_q[b], k0 = cu_k[b];
    const int kv_heads = heads / group;
    const size_t total_q = cu_q[gridDim.z];
    return {cu_q[b + 1] - q0, cu_k[b + 1] - k0, ((size_t)q0 * heads + h0) * D, (size_t)D, heads * D,
            ((size_t)k0 * kv_heads + hkv) * D, kv_heads * D, h0 * total_q + q0, total_q,
            (size_t)q0 * heads + h0, 1, heads, b * heads + h0};
#else
    const int h0 = blockIdx.y * group;  // (b·Hkv + hkv)·g = b·Hq + hkv·g
    return {N, Nk, (size_t)h0 * N * D, (size_t)N * D, D, (size_t)blockIdx.y * Nk * D, D, (size_t)h0 * N, (size_t)N,
            (size_t)h0 * N, (size_t)N, 1, h0};
#endif
}

// The Q blocks i0 … i1 − 1 (of BR rows) some row of which sees a key c0 … c0 + BC − 1 of a sequence through the
// window: row r sees key c iff r + shift − left ≤ c ≤ r + shift + right, so r runs from c0 − shift − right to
// min(c0 + BC, Nk) − 1 − shift + left; empty (i1 ≤ i0) when none (the transpose of seen_blocks)
__device__ __forceinline__ void seen_q_blocks(int& i0, int& i1, int c0, int N, int Nk, int shift, int left, int right) {
    const int lo = c0 - shift - right, hi = min(c0 + BC, Nk) - 1 - shift + left;
    const int Tr = (N + BR - 1) / BR;
    i0 = lo <= 0 ? 0 : lo / BR;
    i1 = hi < 0 ? 0 : min(Tr, hi / BR + 1);
    if (lo > N - 1) i1 = 0;
}

// The K/V blocks j0 … j1 − 1 that rows r0 … r1 of a sequence see through the window [p + shift − left, p + shift
// + right] (sim/machine/mask.py's Rule.seen_blocks); empty (j1 ≤ j0) when none
__device__ __forceinline__ void seen_blocks(int& j0, int& j1, int r0, int r1, int Nk, int shift, int left, int right) {
    const int lo = r0 + shift - left, hi = r1 + shift + right;
    const int Tc = (Nk + BC - 1) / BC;
    j0 = lo <= 0 ? 0 : lo / BC;
    j1 = hi < 0 ? 0 : min(Tc, hi / BC + 1);
    if (lo > Nk - 1) j1 = 0;
}

// whether every row r0 … r1 sees every key c0 … c0 + BC − 1 (no mask needed on that block)
__device__ __forceinline__ bool fully_seen(int c0, int r0, int r1, int Nk, int shift, int left, int right) {
    return c0 + BC <= Nk && c0 + BC - 1 <= r0 + shift + right && c0 >= r1 + shift - left;
}

// whether query row r (of the sequence) sees key c
__device__ __forceinline__ bool sees(int r, int c, int Nk, int shift, int left, int right) {
    return c < Nk && c <= r + shift + right && c >= r + shift - left;
}
#endif

// What a thread block's line between S_ij and the softmax needs: the window (variants.cuh's rule) and the scores'
// constants. Causal is the window (UNBOUNDED, 0); the plain build has none of this.
struct Band {
    int Nk, shift, left, right;  // keys, Nk − N (the bottom-right diagonal), the window's sides
    float scale_log2, cap, inv_cap, slope;  // τ log2 e; c log2 e and its inverse (SOFTCAP); slope log2 e (ALIBI)
};

// c·tanh(x/c) as base-2 scores take it: tanh(y) = 1 − 2 / (e^{2y} + 1), one ex2.approx and one rcp.approx, good
// to ~2⁻²² absolute (tanh.approx.f32 is good to 2⁻¹¹ relative only); ±∞ in, ±c out
__device__ __forceinline__ float softcap_log2(float x, float cap, float inv_cap) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(exp2_approx(x * inv_cap * (2.f * LOG2E)) + 1.f));
    return cap * (1.f - 2.f * r);
}

// ALiBi's bias of row r, key c in base 2: slope_h log2 e · |r + Nk − N − c| (shift = Nk − N: bottom-right). A macro:
// as an inline function the same arithmetic made ptxas spill more (rung 5's ALiBi build 8 → 24 bytes at d = 64).
#define ALIBI_BIAS(slope, r, c, shift) ((slope) * fabsf((float)((r) + (shift) - (c))))

// a score of row r, key c, in base 2 (· τ log2 e) with the softcap and ALiBi applied
__device__ __forceinline__ float scored(float s, int r, int c, int shift, float scale_log2, float cap, float inv_cap, float slope) {
    s *= scale_log2;
#if SOFTCAP
    s = softcap_log2(s, cap, inv_cap);
#endif
#if ALIBI
    s -= ALIBI_BIAS(slope, r, c, shift);
#endif
    return s;
}
