// 08_flash_decoding.cu (rung 8): Flash-Decoding (Dao, Haziza, Massa and Sizov, 2023), a few query rows against a
// long K/V cache, contiguous or paged; sim/algorithms/flash_decoding.py and flash_decoding_paged.py are its listings.
//
// Changed from the forward rungs (02, 03): the roles of rows and keys. A decode step has Nq = 1 … 8 query rows per
// sequence and Nk = thousands of keys, so
//  - GQA packed: one thread block takes the g query heads of one K/V head as one Q of R = g·Nq rows, row r = n·g + t
//    is position n of head t (sim/api/gqa.py's interleave), so each K_j, V_j is read once for the whole group;
//  - split-KV: the keys of one (sequence, K/V head) are cut into `splits` chunks, one thread block each (grid
//    (splits, Hkv, B)); the number comes from sim.machine.occupancy.best_splits, as sim.decode picks it. A paged
//    cache splits a sequence's pages, min(splits, its pages) runs of whole pages (sim.api.paged);
//  - the warps split the keys, not the rows: R ≤ 16 rows are one 16-row MMA tile (zero rows past R), each of the
//    4 warps takes a quarter of every K_j, V_j tile (m16n8k16 mma.sync, the fragments of rung 3); with R ≤ 32 or
//    ≤ 64, 2 or 4 row tiles, the warps split rows and keys 2 × 2 or 4 × 1. Their (m, ℓ, O) merge in SRAM at the end;
//  - K_j, V_j stream through STAGES cp.async stages (16-byte copies, zeros past the chunk's last key), so that about
//    (STAGES − 1) tiles of K and V are in flight per thread block: decode is memory-bound, the goal DRAM bandwidth;
//  - each split writes O_p (float32) and lse_p, or O and L directly where its sequence has one split; the merge
//    LSE = log Σ_p exp(lse_p), O = Σ_p exp(lse_p − LSE)·O_p is done by the group's split blocks launched as one
//    thread block cluster (CLUSTER = splits, 2 … 16 splits of ≤ 1024 keys, paged where the grid is one block an
//    SM: cluster_combine,
//    each block a share of the rows after a cluster barrier), else by all the group's blocks of a grid launched
//    cooperatively, where the grid fits the GPU at once (SPREAD: spread_combine, each block a share after the
//    group's count reaches its splits), else by the last split block of a group to finish (an atomic ticket:
//    combine_group). flash_decoding_combine (below) is the same merge as its own kernel (launch with tickets =
//    nullptr), kept to measure the fused one against;
//  - paged: a sequence whose length is outside 1 … max_pages·page_size, or whose split meets a block-table entry
//    outside 0 … num_pages − 1, gets NaN rows, and the first such entry is reported to pinned host memory (report).
// Bottom-right causal alignment, as the simulator: query position n sees key c iff c ≤ n + seqlen − Nq.
//
// Measured (NVIDIA H100 80GB HBM3; Nq 1, Hq 64, Hkv 8, d 128, fp16; gpu/NOTES.md runs 30 and 35-dec2):
//  - bytes at L2 (ncu) ×1.000–1.001 of sim.decode's, contiguous and paged (the ticket's merge; run 41-dec6 below for
//    the spread merge's). Rows padded by 16 bytes, as in rung 3, took
//    ×1.44–1.50 (pieces straddling 128-byte lines): the rows here are swizzled instead. Static __shared__ variables
//    beside the dynamic tiles took ×1.99 (the tiles off 128-byte alignment), 10% slower: this kernel has none.
//  - `flashsim bench decode` (run 35-dec2): 81–89% of 3.35 TB/s at B ≥ 4 or Nk = 128K, 66% at B 1 Nk 32K, 17% at
//    B 1 Nk 4K (the host's 30 µs a call); 0.95–1.80× SDPA flash (enable_gqa), 0.78–0.99× PyTorch's default
//    (cuDNN). Fused combine against separate: 0.705× at B 1 Nk 4K (one launch fewer), 0.985–1.006× elsewhere. Paged
//    within 0.99–1.06× of contiguous but 1.12× at B 4 Nk 128K (not understood); at one block per SM (run 30's
//    1–4 splits) it took 1.5–1.6×, two per SM close the gap (the occupancy model's paged rule).
//  - tilings Bc × stages 64×2, 64×3 within 2%; 64×4 and 128×2 slower (contiguous, run 30; paged, run 35-dec2).
//    (Their 32×4, within 2%, was a build with 4 key warps of 8 keys each: KT_P = NT_S / 2 = 0, no S, no P̃ V_j;
//    refused now by a static_assert, run 40-dec5.) memcheck and racecheck clean.
//  - run 37-dec3: the fused combine brings the O_p into SRAM by cp.async, as many splits at a time as the stages
//    hold, every piece in flight at once (before: float4 loads into registers, four splits per L2 round trip):
//    0.988× and 0.994× the time at B 4 Nk 128K and B 16 Nk 32K with 33 splits, the same at B 1 (15.2 µs at Nk 4K,
//    the profiler). The splits now come from a model that counts each wave's fill and drain (one wave of one
//    block per SM: 16, 4 and 1 splits at B 1, 4, 16), which made the kernel 2–8% faster than at 33 splits; at one
//    block per SM, 64×4, 64×6 and 128×3 stages were 1–32% slower than 64×3. `flashsim bench decode`: 81–92% of
//    3.35 TB/s at B ≥ 4 or Nk 128K, 70% at B 1 Nk 32K, 21% at B 1 Nk 4K; 1.01–2.29× SDPA flash, 0.95–1.06× PyTorch's
//    default; paged 1.02–1.09× contiguous.
//  - run 39-dec4, decode steps replayed from CUDA graphs (the host out of the loop): at B 1 Nk 4K a block's first
//    tile landed 4.0 µs after it started (globaltimer, medians), its loop ended at 7.7, its O_p was stored at 9.3,
//    its ticket taken at 10.3 (1 µs: barrier, fence, atomic; the last at 12.2), the last block's merge of 16 × 4 KB
//    of O_p ended at 17.1:
//    16.4 µs a step, 10.5 with no merge at all, 15.1 with the separate combine kernel, cuDNN's 14.3. The lse_p and
//    O_p of the merge issued together (one L2 round trip less): no change (16.3 / 16.2 µs), not kept. Merged by a
//    cluster of the group's 16 blocks instead: 12.98 µs (×0.77), 12.7 in `flashsim bench decode`'s graph column
//    against cuDNN's 13.2; but 1.8–6% slower than the ticket where the blocks stream long chunks (B 1 Nk 128K
//    196.3 against 188.7 µs, B 4 Nk 16K 99.7 / 97.9; B 4 Nk 128K 742 against the separate combine's 709; our
//    reading: a cluster's blocks must share one GPC, which doubles some SMs up), so clusters are taken only up to
//    1024 keys a split. Tried, not kept: 8 warps and Bc 128 (×0.93 at Nk 4K with the ticket, ×1.48 with the
//    cluster), 64×4 and 64×5 stages (×1.07–1.14 at Nk 4K: all of a split's tiles in flight did not help), 8 and
//    24–64 splits (×1.15–1.8). Bc 32 × 4 stages with the cluster looked fastest (12.2 / 51.6 / 186.5 / 95.3 µs at
//    B 1 Nk 4K / 32K / 128K, B 4 Nk 16K) but computed nothing (4 warps of 8 keys: run 40-dec5). memcheck and
//    racecheck clean.
//  - run 40-dec5: the warps' merge stored each warp's 16 rows of O (float32, 512 bytes apart) with float2 stores
//    whose 8 rows began in one bank: ncu at B 1 Nk 4K, 134,144 shared-store wavefronts, 98,304 of them bank
//    conflicts. Rows now SO_ROW = d + 8 floats apart, and only the rows < R stored (R = 8 of the tile's 16 at g 8,
//    Nq 1): 18,432 wavefronts, no conflict. Steps from CUDA graphs (launch alone): 12.72 → 11.89 and 12.87 → 11.99
//    µs at B 1 Nk 4K (×0.93, two calls; cuDNN 13.27 / 13.64), 54.6 → 54.1 / 54.2 at Nk 32K, paged 21.3 → 20.9 at
//    Nk 4K, 0.995–1.001× elsewhere. Tried, not kept: Bc 32 × 4 or 6 stages and Bc 64 × 3 with 2 warps (×1.37–2.09;
//    our reading: half the threads issue the loads), 64 × 4 (×1.005–1.74), the cluster at any split length (Nk 32K
//    53.9 against 54.1 µs, Nk 128K 204.2 against 190.5).
//
//  - run 41-dec6, the merge of long splits (the cluster's rule leaves them to the ticket: one block merged the
//    group's 16 × 4 KB of O_p after the others had finished). Now spread_combine: the grid launched by
//    cuLaunchCooperativeKernel (the driver refuses a grid that is not resident at once, so no block waits for one
//    that has not started; gpu.decode_launch takes it where splits × groups ≤ the driver's blocks an SM × SMs),
//    each block stores its O_p, lse_p, fences, adds 1 to the group's ticket, waits (ld.acquire) for `parts`, then
//    merges 1/parts of the group's float4s. Graph steps, launch alone (µs, two calls on two machines): B 1 Nk 32K
//    55.16 / 54.22 → 52.40 / 51.36 (the split kernel alone: 49.40 / 48.59; SDPA's default 53.58 / 51.93), Nk 128K
//    190.66 / 182.93 → 188.10 / 180.65, B 4 Nk 16K 96.77 / 95.76 → 95.36 / 94.53, B 4 Nk 128K 703.4 → 702.2;
//    paged (pages of 256; 32–33 splits, two blocks an SM) B 1 Nk 4K 20.99 / 20.77 → 17.61 / 17.13, Nk 32K
//    59.52 / 59.35 → 54.32 / 54.30, B 4 Nk 16K 99.58 / 99.48 → 98.14 / 97.88. At B 1 Nk 4K the cluster stays
//    (12.13 / 12.02 against 13.36 / 13.30), and the cluster at long splits stays slower (54.2, 202.3, 97.5 µs).
//    Tried, not kept: counter and generation in one word, the last arriver turning the generation (no second add
//    and reset): within ±0.3 µs at 7 points. memcheck and racecheck clean. Bytes at L2 (flashsim compare-decode):
//    read ×1.000 contiguous, ×1.005 paged, ×1.025 with pages of 16 and Nq 4 (sim.decode counts neither each block's
//    re-reads of its rows' lse_p, one 32-byte sector a split, nor thread 0's polls while its group finishes).
//  - run 43-dec8, the paged step at B 1 Nk 4K (16 splits of one page of 256; graph steps 15.7–16.4 µs against the
//    contiguous 11.8–12.0, the split kernel alone 12.6–13.2 against 10.0–10.2). ncu, one launch each of the split
//    kernel alone: the same DRAM bytes (16.87 MB) and L2 sectors, but 2.47 M instructions against 1.80 M contiguous,
//    20.1 against 15.8 µs: load_kv worked each 16-byte copy's address out alone (Cache::row: a branch, c % page_size
//    by a reciprocal, a 64-bit product; ~70 SASS instructions a copy pair, in sequence). Now a tile's first row is
//    found once and each copy is r·stride from it (~16 instructions a pair, no branch): 1.57 M instructions, 16.0 µs;
//    graph steps of the split kernel alone 10.2–10.6 (contiguous 9.8–10.1). The paged layout's key stride (a head's
//    256 B of a key 2 KB from the next key's) costs nothing measurable: the contiguous path on a cache laid out at
//    that stride, 9.97–10.17 against 9.94–10.08; pages in key order rather than shuffled, 10.21–10.41 against
//    10.23–10.43. The cluster merge, kept to contiguous caches before, then paid for a paged one (dec7's, which had
//    not paid on the slow split kernel: 15.3–15.9 against the spread merge's 15.7–16.4 here), where the grid is one
//    block an SM: 12.8–12.9 µs against the spread merge's 13.3–13.7, ×1.04 the contiguous step. The rows' own page
//    lookups are built only for pages not a multiple of BC (PAGE_ROWS): with both paths in every build the
//    contiguous cluster step was 12.4–12.8 µs, without 12.35–12.44 — still above main's 11.9–12.0 (not explained:
//    its split kernel alone is faster, so the cluster build's merge phase is slower), while the other points' graph
//    steps are 0.7–1.8% faster. memcheck and racecheck clean.
//  - run 45: launched as a programmatic dependent (cuLaunchKernelEx; griddepcontrol.launch_dependents at the start or
//    after the loop, griddepcontrol.wait before the first read) with an L2 prefetch of the split's first tiles before
//    the wait: graph steps at B 1 Nk 4K 12.5–12.7 → 12.25–12.4 µs at best (no prefetch), the prefetch slower almost
//    everywhere, PDL 2–9% slower at B 1 Nk 128K, B 4 Nk 16K, B 16 Nk 32K; not kept (commit 37b9438, reverted). The
//    split counts measured: 8 splits (clusters of 8) beat the model's 16 at B 1 Nk 4K by 7% (11.56 against 12.45 µs),
//    6, 10 and 12 do not; the model keeps 16. A paged cache of whole tiles now takes the contiguous splits (one block
//    an SM: 1–5% faster than two), pages of 16 keep two (one was 1.34–1.46× slower).
//
// Injected #defines: HEAD_DIM (64 or 128: rows of Q, K, V, O are exactly d elements), STORAGE (1 fp16, 2 bf16),
// M_TILES (16-row MMA tiles of Q: 1, 2 or 4), NWARPS (4), BC (keys per K_j, V_j tile), STAGES (tiles in SRAM),
// CLUSTER (split blocks a cluster: 1, none, unless gpu.decode_launch injects 2 … 16), SPREAD (1: the grid cooperative,
// its merge spread; 0 else), PAGE_ROWS (1: a paged cache whose pages are not whole tiles; 0 else).

#define NTHREADS (32 * NWARPS)
#define WARPS_N (NWARPS / M_TILES)  // warps that split each tile's keys
#define KW (BC / WARPS_N)           // keys of a tile per warp
#define SROW HEAD_DIM                // SRAM row stride in elements: whole 128-byte lines, 16-byte pieces XOR-swizzled
#define CHUNKS (HEAD_DIM / 8)       // 16-byte pieces in a row
#define KT_D (HEAD_DIM / 16)        // k-steps of Q K_jᵀ
#define NT_S (KW / 8)               // 8-key n-tiles of a warp's S
#define KT_P (KW / 16)              // k-steps of a warp's P̃ V_j
#define NT_O (HEAD_DIM / 8)         // 8-column n-tiles of O
#define MAX_ROWS (16 * M_TILES)
#define SO_ROW (HEAD_DIM + 8)       // the warps' merge buffer's row stride in floats: rows 8 banks apart
#define MAX_SPLITS 128              // gpu.decoding.MAX_SPLITS
#define COMBINE_ROWS 8              // rows of O per flash_decoding_combine block
#ifndef CLUSTER
#define CLUSTER 1  // split blocks a thread block cluster: gpu.decode_launch's (short splits), else 1
#endif
#ifndef SPREAD
#define SPREAD 0  // 1: the grid launched cooperatively (all resident at once), a group's blocks share its merge
#endif
#ifndef PAGE_ROWS
#define PAGE_ROWS 0  // 1: gpu.decode_launch's build for a paged cache whose page_size is not a multiple of BC
#endif
#define SPREAD_LOADS 16  // spread_combine: the splits' lse_p and O_p pieces a thread has in flight at once
static_assert(KW % 16 == 0, "a warp's keys of a tile are whole 16-key k-steps of P̃ V_j (Bc 32 needs ≤ 2 key warps)");
#if CLUSTER > 1
#define CLUSTER_DIMS __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_DIMS
#endif

#include "common.cuh"  // NEG_INF, LN2, cp.async, ldmatrix, mma, pack2, exp2_approx

// Swizzled SRAM tiles: the 16-byte piece c/8 of row r sits at piece (c/8) XOR (r mod 8), so that ldmatrix's 8 rows
// hit 8 bank groups without padding (padded rows cost 1.5× the bytes at L2: gpu/NOTES.md, rung 8's run).
__device__ __forceinline__ int swz(int r, int c) { return r * SROW + ((((c >> 3) ^ r) & 7) | ((c >> 3) & ~7)) * 8; }
// A lane's part of an ldmatrix address, (row r, piece c/8 with c = 0 or 8) folded once (rung 3's LaneOffset); the
// tile's (R, C), R a multiple of 8 and C of 16, is added per ldmatrix: byte R·SROW·2 + ((C·2) XOR piece)
struct Lane {
    u32 row, piece;
};
__device__ __forceinline__ Lane lane_part(int r, int c) { return {(u32)(r * SROW * 2), (u32)((((c >> 3) ^ r) & 7) << 4)}; }
__device__ __forceinline__ u32 ld_addr(u32 base, Lane lane, int R, int C) { return base + lane.row + R * SROW * 2 + ((C * 2) ^ lane.piece); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// where a key's row of K (and V) lies, in elements: contiguous (B, Hkv, Nk, d), or paged (num_pages, page_size, Hkv,
// d) with the sequence's block-table row. A tile's keys are one run of rows `stride` apart (d contiguous, Hkv·d paged)
// in a contiguous cache and, paged, where page_size is a multiple of BC (PAGE_ROWS 0: a tile lies in one page, its
// entry looked up once ahead); else (PAGE_ROWS 1, pages not whole tiles) each row finds its page. An entry outside
// 0 … num_pages − 1 (found and reported before the loop) gives −1, never read
struct Cache {
    const int* table;  // block_table + b · max_pages, or nullptr for a contiguous cache
    long long base;    // contiguous: ((b · Hkv + hk) · Nk) · d; paged: hk · d
    int page_size, stride, num_pages;
    __device__ __forceinline__ long long in_page(int page, int c) const {
        if (page < 0 || page >= num_pages) return -1;
        return ((long long)page * page_size + c % page_size) * stride + base;
    }
    // key c0's row where the tile from c0 is one run: once a tile
    __device__ __forceinline__ long long first(int c0, int page) const {
        return table == nullptr ? base + (long long)c0 * HEAD_DIM : in_page(page, c0);
    }
    __device__ __forceinline__ long long row(int c) const { return in_page(__ldg(table + c / page_size), c); }
    __device__ __forceinline__ int page_of(int c) const {
        return table != nullptr && !PAGE_ROWS ? __ldg(table + c / page_size) : 0;
    }
};

// The first refused argument a kernel meets, in ERRORS ints of pinned host memory (gpu.pages reads them without a
// synchronization): code (1 block_table entry, 2 cache_seqlens), sequence b, entry j, its value, num_pages, the
// table's keys per sequence; the code last. Only the first report lands: the reporter claims errors[ERRORS] (device
// memory: a PCIe host has no atomics on host memory, compute-sanitizer's memcheck refuses them), which the host
// sets back to zero after raising.
#define ERRORS 6
__device__ __forceinline__ void report(volatile int* errors, int* claim, int code, int b, int j, int value, int num_pages,
                                    int capacity) {
    if (atomicCAS(claim, 0, 1) == 0) {
        errors[1] = b, errors[2] = j, errors[3] = value, errors[4] = num_pages, errors[5] = capacity;
        __threadfence_system();
        errors[0] = code;
    }
}

// keys c0 … c0 + BC − 1 (those < c1) of K and V → one stage of (BC, SROW) tiles in SRAM; zeros past c1. `page`: the
// tile's page where a tile lies in one (PAGE_ROWS 0), read from the block table one tile ahead. A thread copies the
// 16-byte piece k/8 of rows r, r + NTHREADS/CHUNKS, …; in a run its row's offset is r·stride from the tile's first,
// found once a tile, so that a copy's address is one multiply-add (run 43-dec8: the paged cache's c % page_size and
// 64-bit product per copy, behind a branch, had made each copy ~70 instructions; the rows' own lookups are built only
// where pages are shorter than tiles, PAGE_ROWS)
__device__ __forceinline__ void load_kv(elem_t* sK, elem_t* sV, const elem_t* K, const elem_t* V, const Cache& cache,
                                        int c0, int c1, int tid, int page) {
    constexpr int STEP = NTHREADS / CHUNKS;  // rows between a thread's copies
    static_assert(NTHREADS % CHUNKS == 0 && BC % STEP == 0, "a tile's pieces are whole rounds of the block's threads");
    const int r0 = tid / CHUNKS, k = (tid % CHUNKS) * 8;
#if PAGE_ROWS
    if (cache.table != nullptr) {
#pragma unroll
        for (int it = 0; it < BC / STEP; ++it) {
            const int r = r0 + it * STEP;
            const long long at = c0 + r < c1 ? cache.row(c0 + r) : -1;
            cp_async_16(sK + swz(r, k), at < 0 ? K : K + at + k, at < 0 ? 0 : 16);
            cp_async_16(sV + swz(r, k), at < 0 ? V : V + at + k, at < 0 ? 0 : 16);
        }
        return;
    }
#endif
    const long long first = cache.first(c0, page);
    const elem_t* Kt = K + (first < 0 ? 0 : first) + k;
    const elem_t* Vt = V + (first < 0 ? 0 : first) + k;
#pragma unroll
    for (int it = 0; it < BC / STEP; ++it) {
        const int r = r0 + it * STEP;
        const bool in = first >= 0 && c0 + r < c1;
        const int at = in ? r * cache.stride : 0;
        cp_async_16(sK + swz(r, k), in ? Kt + at : K, in ? 16 : 0);
        cp_async_16(sV + swz(r, k), in ? Vt + at : V, in ? 16 : 0);
    }
}

// NaN in O's and L's R rows of a group (row0 …), the answer for a sequence whose arguments the kernel refused
__device__ __forceinline__ void nan_rows(elem_t* O, float* L, long long row0, int R, int tid) {
    const float nan = __int_as_float(0x7fc00000);
    for (int i = tid; i < R * HEAD_DIM / 2; i += NTHREADS) reinterpret_cast<u32*>(O + row0 * HEAD_DIM)[i] = pack2(nan, nan);
    if (tid < R) L[row0 + tid] = nan;
}

__device__ void combine_group(const float* O_parts, const float* lse_parts, elem_t* O, float* L, float* sW, float* s_LSE,
                              long long row0, long long rows, int R, int parts, int tid);
__device__ void cluster_combine(const float* O_parts, const float* lse_parts, elem_t* O, float* L, long long row0,
                                long long rows, int R, int parts, int p, int tid);
__device__ void spread_combine(const float* O_parts, const float* lse_parts, elem_t* O, float* L, int* ticket,
                               long long row0, long long rows, int R, int parts, int p, int tid);

// Q: (B, Hq, Nq, d); K, V: the cache; O: like Q; L: (B, Hq, Nq); O_parts: (splits, B·Hq·Nq, d) float32, lse_parts:
// (splits, B·Hq·Nq). block_table (B, max_pages) and seqlens (B,) int32, both nullptr for a contiguous cache of Nk keys.
// tickets (B·Hkv,) int32, zero: the fused combine (the last split block of a group to finish merges the group, then
// sets its ticket back to zero); nullptr: flash_decoding_combine runs after. errors: ERRORS ints of pinned host memory.
// Grid (splits, Hkv, B); NTHREADS threads; (MAX_ROWS + 2·STAGES·BC)·SROW·2 bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(NTHREADS) CLUSTER_DIMS
flash_decoding_split(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
                     const int* __restrict__ block_table, const int* __restrict__ seqlens, elem_t* __restrict__ O,
                     float* __restrict__ L, float* __restrict__ O_parts, float* __restrict__ lse_parts,
                     int* __restrict__ tickets, volatile int* errors, int* claim, int Nq, int g, int Nk, int page_size, int max_pages,
                     int num_pages, int splits, float scale_log2, int causal)
{
    extern __shared__ __align__(16) elem_t smem[];
    elem_t* sQ = smem;                         // SRAM: Q, (MAX_ROWS, SROW), rows ≥ R zero
    elem_t* sKV = sQ + MAX_ROWS * SROW;        // SRAM: STAGES × (K_j (BC, SROW), V_j (BC, SROW))

    const int p = blockIdx.x, hk = blockIdx.y, b = blockIdx.z, Hkv = gridDim.y, B = gridDim.z;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int gq = lane / 4, tq = lane % 4;  // fragment coordinates: rows gq, gq + 8; columns 2tq, 2tq + 1
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;  // this warp's row tile and key quarter (or half)
    const int R = g * Nq, Hq = Hkv * g;
    const long long row0 = ((long long)b * Hq + (long long)hk * g) * Nq;  // the group's first row of O, L (head-major)
    const long long rows = (long long)B * Hq * Nq;  // of O, L and each split's O_p, lse_p

    // this split's keys [k0, k1) of the sequence's seqlen: sim.machine.blocks.chunks of the keys, or of the pages
    Cache cache{nullptr, 0, page_size, HEAD_DIM, num_pages};
    int seqlen = Nk, parts = splits, k0, k1;
    if (block_table != nullptr) {
        seqlen = seqlens[b];
        if (seqlen < 1 || seqlen > max_pages * page_size) {  // refused: NaN rows, reported, nothing read (every block
            // of a cluster is this sequence's: all leave, none waits at the cluster barrier)
            if (p == 0) nan_rows(O, L, row0, R, tid);
            if (p == 0 && hk == 0 && tid == 0) report(errors, claim, 2, b, 0, seqlen, num_pages, max_pages * page_size);
            return;
        }
        const int pages = (seqlen + page_size - 1) / page_size;
        parts = min(splits, pages);
        if (p >= parts) {  // no page of this sequence: nothing to read; a cluster's block still merges its share
#if CLUSTER > 1
            cluster_combine(O_parts, lse_parts, O, L, row0, rows, R, parts, p, tid);
#endif
            return;
        }
        k0 = (int)((long long)p * pages / parts) * page_size;
        k1 = min((int)((long long)(p + 1) * pages / parts) * page_size, seqlen);
        cache.table = block_table + (long long)b * max_pages;
        cache.base = (long long)hk * HEAD_DIM;
        cache.stride = Hkv * HEAD_DIM;  // PAGE_ROWS 0: page_size % BC = 0 and k0 page-aligned, no tile straddles pages
    } else {
        k0 = (int)((long long)p * Nk / splits);
        k1 = (int)((long long)(p + 1) * Nk / splits);
        cache.base = ((long long)b * Hkv + hk) * Nk * HEAD_DIM;
    }
    const int shift = seqlen - Nq;  // causal: position n sees key c iff c ≤ n + shift
    const int T = (k1 - k0 + BC - 1) / BC;
    int bad = -1;  // a block-table entry of this split's pages that points outside the cache (this thread's share)
    if (cache.table != nullptr)
        for (int j = k0 / page_size + tid; j < (k1 + page_size - 1) / page_size; j += NTHREADS) {
            const int page = __ldg(cache.table + j);
            if (page < 0 || page >= num_pages) bad = j;
        }

    // load Q: row r = n·g + t is q[b, hk·g + t, n], rows ≥ R zero (read nothing); with K_0, V_0 one cp.async group
    for (int chunk = tid; chunk < MAX_ROWS * CHUNKS; chunk += NTHREADS) {
        const int r = chunk / CHUNKS, k = (chunk % CHUNKS) * 8;
        const long long src = r < R ? (((long long)b * Hq + hk * g + r % g) * Nq + r / g) * HEAD_DIM + k : 0;
        cp_async_16(sQ + swz(r, k), Q + src, r < R ? 16 : 0);
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < T) load_kv(sKV + 2 * s * BC * SROW, sKV + (2 * s + 1) * BC * SROW, K, V, cache, k0 + s * BC, k1, tid,
                           cache.page_of(k0 + s * BC));
        cp_async_commit();
    }
    int page_next = STAGES - 1 < T ? cache.page_of(k0 + (STAGES - 1) * BC) : 0;  // the next tile's page, ahead

    // O = 0, ℓ = 0, m = −∞ in registers: this warp's 16 rows, rows gq and gq + 8 per lane; m in raw scores
    float o[NT_O][4], m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int nt = 0; nt < NT_O; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nt][e] = 0.f;
    u32 q[KT_D][4];  // registers: this warp's 16 rows of Q as MMA A fragments
    const Lane a_lane = lane_part(lane & 15, (lane >> 4) * 8);                    // A: Q's 16 rows
    const Lane b_lane = lane_part((lane & 7) + (lane >> 4) * 8, ((lane >> 3) & 1) * 8);  // B: K_j, 2 n-tiles
    const Lane t_lane = lane_part((lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8);  // B: V_j, transposed

    for (int j = 0; j < T; ++j) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();  // tile j (and Q) in SRAM; every warp is done with tile j − 1's stage, refilled next
        const int next = j + STAGES - 1, sn = next % STAGES;
        if (next < T) load_kv(sKV + 2 * sn * BC * SROW, sKV + (2 * sn + 1) * BC * SROW, K, V, cache, k0 + next * BC, k1, tid,
                              page_next);
        cp_async_commit();
        if (next + 1 < T) page_next = cache.page_of(k0 + (next + 1) * BC);  // in flight while tile j is computed
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < KT_D; ++kk) ldmatrix_x4(q[kk], ld_addr(smem_u32(sQ), a_lane, wm * 16, kk * 16));
        }
        const u32 K_j = smem_u32(sKV + 2 * (j % STAGES) * BC * SROW);  // this stage's tiles; the warp's keys from wn·KW
        const u32 V_j = K_j + BC * SROW * 2;

        // S = Q K_jᵀ for this warp's KW keys: (16, KW) fp32 in registers
        float s[NT_S][4];
#pragma unroll
        for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KT_D; ++kk)
#pragma unroll
            for (int np = 0; np < NT_S / 2; ++np) {
                u32 bk[4];
                ldmatrix_x4(bk, ld_addr(K_j, b_lane, wn * KW + np * 16, kk * 16));
                mma_16816(s[2 * np], q[kk], bk[0], bk[1]);
                mma_16816(s[2 * np + 1], q[kk], bk[2], bk[3]);
            }

        // −∞ past the chunk's last key and, causal, for keys c > n + shift (n = r / g); only the last tiles need it
        const int c0 = k0 + j * BC;
        if (c0 + BC > k1 || (causal && c0 + BC - 1 > shift)) {
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int c = c0 + wn * KW + nt * 8 + 2 * tq + (e & 1);
                    const int r = wm * 16 + gq + (e >> 1) * 8;
                    if (c >= k1 || (causal && c > r / g + shift)) s[nt][e] = NEG_INF;
                }
        }

        // the online softmax (FlashAttention-2, Algorithm 1 lines 9–10) in base 2, the scale folded in
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float m_new = m[h];
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt) m_new = fmaxf(m_new, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
            m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffff, m_new, 1));
            m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffff, m_new, 2));
            const float m_scaled = m_new == NEG_INF ? 0.f : m_new * scale_log2;  // no key seen yet: P̃ = 0, not NaN
            const float alpha = exp2_approx(m[h] * scale_log2 - m_scaled);
            m[h] = m_new;
            float rowsum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; ++e) {
                    s[nt][e] = exp2_approx(fmaf(s[nt][e], scale_log2, -m_scaled));
                    rowsum += s[nt][e];
                }
            l[h] = alpha * l[h] + rowsum;  // this lane's share of ℓ; the quad's four are summed at the end
#pragma unroll
            for (int nt = 0; nt < NT_O; ++nt) {
                o[nt][2 * h] *= alpha;
                o[nt][2 * h + 1] *= alpha;
            }
        }

        // O += P̃ V_j: P̃ (rounded to fp16/bf16) as the A operand, V_j through ldmatrix.trans
#pragma unroll
        for (int kk = 0; kk < KT_P; ++kk) {
            u32 a[4];
            accumulators_to_a(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < NT_O / 2; ++np) {
                u32 bv[4];
                ldmatrix_x4_trans(bv, ld_addr(V_j, t_lane, wn * KW + kk * 16, np * 16));
                mma_16816(o[2 * np], a, bv[0], bv[1]);
                mma_16816(o[2 * np + 1], a, bv[2], bv[3]);
            }
        }
    }
    cp_async_wait<0>();
    // no copy in flight and no warp reading a stage: the stages become the merge buffers. A refused page makes the
    // split's rows NaN (O_p or O, and lse_p or L), so that the combine's answer is NaN too
    const bool refused = __syncthreads_or(bad >= 0);
    if (bad >= 0) report(errors, claim, 1, b, bad, __ldg(cache.table + bad), num_pages, max_pages * page_size);

    // the warps of one row tile merge their (m, ℓ, O) over their keys: each writes its own rows < R to SRAM (float32),
    // rows SO_ROW floats apart, so that a float2 store's 8 rows × 32 bytes take 2 wavefronts, not 8 (rows of
    // HEAD_DIM floats, 512 bytes, all began in one bank)
    float* sO = reinterpret_cast<float*>(sKV);  // (NWARPS, 16, SO_ROW)
    float* sm = sO + NWARPS * 16 * SO_ROW;      // (NWARPS, 16): m
    float* sl = sm + NWARPS * 16;               // (NWARPS, 16): ℓ
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l_row = l[h];
        l_row += __shfl_xor_sync(0xffffffff, l_row, 1);
        l_row += __shfl_xor_sync(0xffffffff, l_row, 2);
        const int r = gq + 8 * h;
        if (wm * 16 + 8 * h >= R) continue;  // rows past R (all 8 of this half, warp-uniform) are never read
        if (tq == 0) {
            sm[warp * 16 + r] = m[h];
            sl[warp * 16 + r] = l_row;
        }
#pragma unroll
        for (int nt = 0; nt < NT_O; ++nt)
            *reinterpret_cast<float2*>(sO + (warp * 16 + r) * SO_ROW + nt * 8 + 2 * tq) = make_float2(o[nt][2 * h], o[nt][2 * h + 1]);
    }
    __syncthreads();

    // row r of the group (r < R), 4 columns per thread: m = max_w m_w, ℓ = Σ_w 2^((m_w − m)·τ·log2 e) ℓ_w, likewise O;
    // O_p = diag(ℓ)⁻¹ O, lse_p = m·τ + ln ℓ (−∞ and zeros for a row that saw no key of this split)
    float* sL = sl + NWARPS * 16;  // (MAX_ROWS,): each row's lse_p, written to HBM together below
    const bool direct = parts == 1;
    for (int idx = tid; idx < R * (HEAD_DIM / 4); idx += NTHREADS) {
        const int r = idx / (HEAD_DIM / 4), col = (idx % (HEAD_DIM / 4)) * 4;
        const int w0 = (r / 16) * WARPS_N, rr = r % 16;
        float m_row = NEG_INF;
        for (int w = w0; w < w0 + WARPS_N; ++w) m_row = fmaxf(m_row, sm[w * 16 + rr]);
        const float m_scaled = m_row == NEG_INF ? 0.f : m_row * scale_log2;
        float l_row = 0.f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int w = w0; w < w0 + WARPS_N; ++w) {
            const float wgt = exp2_approx(sm[w * 16 + rr] * scale_log2 - m_scaled);
            const float4 x = *reinterpret_cast<const float4*>(sO + (w * 16 + rr) * SO_ROW + col);
            l_row += wgt * sl[w * 16 + rr];
            acc.x += wgt * x.x, acc.y += wgt * x.y, acc.z += wgt * x.z, acc.w += wgt * x.w;
        }
        const float inv = refused ? __int_as_float(0x7fc00000) : l_row == 0.f ? 0.f : 1.f / l_row;
        acc.x *= inv, acc.y *= inv, acc.z *= inv, acc.w *= inv;
        const int t = r % g, n = r / g;
        const long long out = row0 + (long long)t * Nq + n;  // (b, hk·g + t, n) in O and L's head-major rows
        if (col == 0) sL[t * Nq + n] = refused ? inv : l_row == 0.f ? NEG_INF : (m_scaled + log2f(l_row)) * LN2;
        if (direct) {
            uint2 packed = make_uint2(pack2(acc.x, acc.y), pack2(acc.z, acc.w));
            *reinterpret_cast<uint2*>(O + out * HEAD_DIM + col) = packed;
        } else {
            *reinterpret_cast<float4*>(O_parts + ((long long)p * rows + out) * HEAD_DIM + col) = acc;
        }
    }
    __syncthreads();
    if (tid < R) {  // the group's R statistics are contiguous in L (and in lse_parts[p]): one store of R floats
        if (direct) L[row0 + tid] = sL[tid];
        else lse_parts[p * rows + row0 + tid] = sL[tid];
    }
#if CLUSTER > 1
    cluster_combine(O_parts, lse_parts, O, L, row0, rows, R, parts, p, tid);
    return;
#endif
    if (direct || tickets == nullptr) return;
#if SPREAD
    spread_combine(O_parts, lse_parts, O, L, tickets + (long long)b * Hkv + hk, row0, rows, R, parts, p, tid);
    return;
#endif

    // the fused combine: the barrier orders every thread's O_p, lse_p stores before thread 0's fence, which makes them
    // visible device-wide before its ticket (cooperative groups' grid sync does the same); the last of the group's
    // `parts` blocks to take one merges them all (thread 0 fences again after the atomic, the barrier passes it on)
    // (no static shared memory in this kernel: it would shift the dynamic tiles off their 128-byte alignment, and
    // then L2 hands the SMs twice the bytes cp.async asks for: gpu/NOTES.md, run 35-dec2. Q's SRAM is free now.)
    int* s_last = reinterpret_cast<int*>(sQ);
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        const int ticket = atomicAdd(tickets + (long long)b * Hkv + hk, 1);
        *s_last = ticket == parts - 1;
        if (*s_last) tickets[(long long)b * Hkv + hk] = 0;  // ready for the next launch on this stream
        __threadfence();
    }
    __syncthreads();
    if (!*s_last) return;
    combine_group(O_parts, lse_parts, O, L, reinterpret_cast<float*>(sKV), reinterpret_cast<float*>(sQ) + 4, row0, rows,
                  R, parts, tid);
}

// One group's R rows of O and L from its `parts` splits, by the block that finished last (SRAM, the stages': sW,
// parts·R floats, then the O_p; s_LSE, R floats):
// LSE = log Σ_p exp(lse_p) (max-shifted; NaN if any lse_p is), O = Σ_p exp(lse_p − LSE)·O_p. O_p, lse_p are read
// through L2 (ld.global.cg, cp.async.cg): other blocks wrote them during this kernel. The O_p come into SRAM as many
// splits at a time as fit, every 16-byte piece of them in flight at once: one L2 round trip per batch, where loads
// into registers took one per few splits (the combine is the tail of a step at batch 1).
__device__ void combine_group(const float* O_parts, const float* lse_parts, elem_t* O, float* L, float* sW, float* s_LSE,
                              long long row0, long long rows, int R, int parts, int tid)
{
    constexpr int STAGE_FLOATS = STAGES * BC * SROW;  // the stages' SRAM (2·STAGES·BC rows of fp16/bf16), in floats
    constexpr int PIECES = MAX_ROWS * HEAD_DIM / 4 / NTHREADS;  // float4 pieces of O per thread at most
    static_assert(MAX_SPLITS * MAX_ROWS + MAX_ROWS * HEAD_DIM <= STAGE_FLOATS, "the weights and one O_p fit in SRAM");
    static_assert(4 + MAX_ROWS <= MAX_ROWS * SROW / 2, "the flag and the LSEs fit in Q's SRAM");
    for (int idx = tid; idx < parts * R; idx += NTHREADS) sW[idx] = __ldcg(lse_parts + (idx / R) * rows + row0 + idx % R);
    __syncthreads();
    const int warp = tid / 32, lane = tid % 32;
    for (int r = warp; r < R; r += NWARPS) {  // a warp per row, its lanes over the splits
        float mx = NEG_INF;
        bool nan = false;
        for (int p = lane; p < parts; p += 32) mx = fmaxf(mx, sW[p * R + r]), nan |= isnan(sW[p * R + r]);
        for (int k = 16; k > 0; k /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, k));
        nan = __any_sync(0xffffffff, nan);
        float sum = 0.f;
        if (mx != NEG_INF)
            for (int p = lane; p < parts; p += 32) sum += exp2_approx((sW[p * R + r] - mx) * LOG2E);
        for (int k = 16; k > 0; k /= 2) sum += __shfl_xor_sync(0xffffffff, sum, k);
        const float LSE = nan ? __int_as_float(0x7fc00000) : mx == NEG_INF ? NEG_INF : mx + logf(sum);
        __syncwarp();  // every lane has read row r's lse_p before they become its weights
        for (int p = lane; p < parts; p += 32) sW[p * R + r] = LSE == NEG_INF ? 0.f : exp2_approx((sW[p * R + r] - LSE) * LOG2E);
        if (lane == 0) s_LSE[r] = LSE;
    }
    // O_p of the group: R contiguous rows of d floats; `batch` of them at a time in SRAM after the weights
    const int size = R * HEAD_DIM, weights = (parts * R + 3) & ~3;
    const int batch = (STAGE_FLOATS - weights) / size;
    float* sP = sW + weights;
    float4 acc[PIECES];
#pragma unroll
    for (int i = 0; i < PIECES; ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int p0 = 0; p0 < parts; p0 += batch) {
        const int n = min(batch, parts - p0);
        for (int i = tid; i < n * size / 4; i += NTHREADS) {
            const int q = i / (size / 4), e = (i % (size / 4)) * 4;
            cp_async_16(sP + q * size + e, O_parts + ((p0 + q) * rows + row0) * HEAD_DIM + e, 16);
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();  // the batch (and, the first time, every weight) in SRAM
#pragma unroll
        for (int i = 0; i < PIECES; ++i) {
            const int idx = tid + i * NTHREADS;  // the piece: row idx / (d/4), columns 4·(idx mod d/4) …
            if (idx < size / 4)
                for (int q = 0; q < n; ++q) {
                    const float w = sW[(p0 + q) * R + idx / (HEAD_DIM / 4)];
                    const float4 x = *reinterpret_cast<const float4*>(sP + q * size + idx * 4);
                    acc[i].x += w * x.x, acc[i].y += w * x.y, acc[i].z += w * x.z, acc[i].w += w * x.w;
                }
        }
        __syncthreads();  // every thread done with the batch before the next one lands
    }
#pragma unroll
    for (int i = 0; i < PIECES; ++i) {
        const int idx = tid + i * NTHREADS;
        if (idx < size / 4)
            *reinterpret_cast<uint2*>(O + row0 * HEAD_DIM + idx * 4) = make_uint2(pack2(acc[i].x, acc[i].y), pack2(acc[i].z, acc[i].w));
    }
    if (tid < R) L[row0 + tid] = s_LSE[tid];
}

// The combine by a group's CLUSTER split blocks, launched as one thread block cluster (2 … 16 splits): a cluster
// barrier, whose release and acquire make every block's O_p, lse_p stores visible to the others, then block p merges
// its share of the group's R rows × d/4 float4 pieces, pieces [p·n/CLUSTER, (p+1)·n/CLUSTER) of n = R·d/4, with the
// same arithmetic as combine_group, over the `parts` splits that hold keys (contiguous: all CLUSTER; paged:
// min(CLUSTER, the sequence's pages), the blocks past them arrive with no keys read and merge their share too; one
// part: it wrote O and L itself). A thread's lse_p and O_p pieces are all in flight at once (one L2 round trip), and
// the group's 64 KB of O_p (R = 8, 16 splits) are read by 16 SMs, not one; no ticket, no fence. Each O_p piece is
// read once, as the simulator counts; a row's lse_p by each block that holds a piece of it.
__device__ void cluster_combine(const float* O_parts, const float* lse_parts, elem_t* O, float* L, long long row0,
                                long long rows, int R, int parts, int p, int tid)
{
#if CLUSTER > 1
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    if (parts == 1) return;
    const int n = R * (HEAD_DIM / 4);
    for (int i = p * n / CLUSTER + tid; i < (p + 1) * n / CLUSTER; i += NTHREADS) {
        const int j = i / (HEAD_DIM / 4), col = (i % (HEAD_DIM / 4)) * 4;  // row j of the group's O, L; its columns
        float lse[CLUSTER];
        float4 x[CLUSTER];
#pragma unroll
        for (int q = 0; q < CLUSTER; ++q) {
            const bool in = q < parts;  // a split past the sequence's pages: no keys, weight 0, nothing read
            lse[q] = in ? __ldcg(lse_parts + q * rows + row0 + j) : NEG_INF;
            x[q] = in ? __ldcg(reinterpret_cast<const float4*>(O_parts + (q * rows + row0 + j) * HEAD_DIM + col))
                      : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        float mx = NEG_INF;
        bool nan = false;
#pragma unroll
        for (int q = 0; q < CLUSTER; ++q) mx = fmaxf(mx, lse[q]), nan |= isnan(lse[q]);
        float sum = 0.f;
        if (mx != NEG_INF)
#pragma unroll
            for (int q = 0; q < CLUSTER; ++q) sum += exp2_approx((lse[q] - mx) * LOG2E);
        const float LSE = nan ? __int_as_float(0x7fc00000) : mx == NEG_INF ? NEG_INF : mx + logf(sum);
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int q = 0; q < CLUSTER; ++q) {
            const float w = LSE == NEG_INF ? 0.f : exp2_approx((lse[q] - LSE) * LOG2E);
            acc.x += w * x[q].x, acc.y += w * x[q].y, acc.z += w * x[q].z, acc.w += w * x[q].w;
        }
        *reinterpret_cast<uint2*>(O + (row0 + j) * HEAD_DIM + col) = make_uint2(pack2(acc.x, acc.y), pack2(acc.z, acc.w));
        if (col == 0) L[row0 + j] = LSE;
    }
#endif
}

// The combine by all `parts` split blocks of a group, no cluster (SPREAD: gpu.decode_launch launches the grid with
// cuLaunchCooperativeKernel, which refuses a grid whose blocks cannot all be resident at once, so a block that waits
// here for the others of its group never waits for one that has not started). Each block stores O_p, lse_p, fences,
// adds 1 to the group's ticket and waits until it reads `parts` (ld.acquire: the others' stores are visible then),
// then merges pieces [p·n/parts, (p+1)·n/parts) of the group's n = R·d/4 float4s, SPREAD_LOADS splits' lse_p and O_p
// pieces in flight at a time (the max-shifted sums rescaled from one batch to the next: any parts ≤ MAX_SPLITS);
// a second add after its merge, and the block whose add is the group's 2·parts-th sets the ticket back to zero (every
// block has passed its wait by then). Each O_p piece is read once, as the simulator counts; a row's lse_p by each
// thread that holds a piece of it (L2 hits).
__device__ void spread_combine(const float* O_parts, const float* lse_parts, elem_t* O, float* L, int* ticket,
                               long long row0, long long rows, int R, int parts, int p, int tid)
{
    __syncthreads();  // every thread's O_p, lse_p stores issued before thread 0's fence
    if (tid == 0) {
        __threadfence();
        atomicAdd(ticket, 1);
        int arrived;
        do asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(arrived) : "l"(ticket) : "memory");
        while (arrived < parts);
    }
    __syncthreads();
    const int n = R * (HEAD_DIM / 4);
    for (int i = p * n / parts + tid; i < (p + 1) * n / parts; i += NTHREADS) {
        const int j = i / (HEAD_DIM / 4), col = (i % (HEAD_DIM / 4)) * 4;  // row j of the group's O, L; its columns
        float M = NEG_INF, sum = 0.f;  // LSE = M + ln sum, O = acc / sum: Σ_p exp(lse_p − M)·O_p over the batches
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        bool nan = false;
        for (int q0 = 0; q0 < parts; q0 += SPREAD_LOADS) {
            float lse[SPREAD_LOADS];
            float4 x[SPREAD_LOADS];
#pragma unroll
            for (int u = 0; u < SPREAD_LOADS; ++u) {
                const bool in = q0 + u < parts;
                lse[u] = in ? __ldcg(lse_parts + (q0 + u) * rows + row0 + j) : NEG_INF;
                x[u] = in ? __ldcg(reinterpret_cast<const float4*>(O_parts + ((q0 + u) * rows + row0 + j) * HEAD_DIM + col))
                          : make_float4(0.f, 0.f, 0.f, 0.f);
            }
            float mx = M;
#pragma unroll
            for (int u = 0; u < SPREAD_LOADS; ++u) mx = fmaxf(mx, lse[u]), nan |= isnan(lse[u]);
            if (mx == NEG_INF) continue;  // no split so far saw a key
            const float rescale = exp2_approx((M - mx) * LOG2E);  // 0 while M = −∞
            sum *= rescale, acc.x *= rescale, acc.y *= rescale, acc.z *= rescale, acc.w *= rescale;
#pragma unroll
            for (int u = 0; u < SPREAD_LOADS; ++u) {
                const float w = exp2_approx((lse[u] - mx) * LOG2E);
                sum += w, acc.x += w * x[u].x, acc.y += w * x[u].y, acc.z += w * x[u].z, acc.w += w * x[u].w;
            }
            M = mx;
        }
        const float inv = nan ? __int_as_float(0x7fc00000) : M == NEG_INF ? 0.f : 1.f / sum;
        *reinterpret_cast<uint2*>(O + (row0 + j) * HEAD_DIM + col) =
            make_uint2(pack2(acc.x * inv, acc.y * inv), pack2(acc.z * inv, acc.w * inv));
        if (col == 0) L[row0 + j] = nan ? inv : M == NEG_INF ? NEG_INF : M + logf(sum);
    }
    if (tid == 0 && atomicAdd(ticket, 1) == 2 * parts - 1) atomicExch(ticket, 0);  // ready for the next launch
}

// The combine: rows of O (B·Hq·Nq of them, 8 per thread block, a warp each) whose sequence had parts > 1 splits.
// LSE = log Σ_p exp(lse_p) (max-shifted), O = Σ_p exp(lse_p − LSE)·O_p; written as O (storage dtype) and L.
// Grid (⌈rows / 8⌉); 256 threads; static shared memory. seqlens nullptr: every row has `splits` parts; a sequence
// whose length the split kernel refused has none (its rows are NaN already); a NaN lse_p (a refused page) makes the
// row NaN.
extern "C" __global__ void __launch_bounds__(32 * COMBINE_ROWS)
flash_decoding_combine(const float* __restrict__ O_parts, const float* __restrict__ lse_parts,
                       const int* __restrict__ seqlens, elem_t* __restrict__ O, float* __restrict__ L, int rows,
                       int rows_per_sequence, int splits, int page_size, int max_pages)
{
    __shared__ float s_lse[MAX_SPLITS][COMBINE_ROWS];  // SRAM: lse_1 … lse_P of the block's rows
    __shared__ float s_L[COMBINE_ROWS];
    __shared__ int s_parts[COMBINE_ROWS];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const long long first = (long long)blockIdx.x * COMBINE_ROWS;
    if (tid < COMBINE_ROWS) {
        int parts = 0;
        if (first + tid < rows) {
            parts = splits;
            if (seqlens != nullptr) {
                const int seqlen = seqlens[(first + tid) / rows_per_sequence];
                const int pages = (seqlen + page_size - 1) / page_size;
                parts = seqlen < 1 || seqlen > max_pages * page_size ? 0 : min(splits, pages);
            }
        }
        s_parts[tid] = parts;
    }
    __syncthreads();
    for (int idx = tid; idx < splits * COMBINE_ROWS; idx += 32 * COMBINE_ROWS) {  // lse_p of 8 adjacent rows at once
        const int p = idx / COMBINE_ROWS, r = idx % COMBINE_ROWS;
        if (p < s_parts[r] && s_parts[r] > 1) s_lse[p][r] = lse_parts[(long long)p * rows + first + r];
    }
    __syncthreads();
    const int parts = s_parts[warp];
    const long long row = first + warp;
    float LSE = NEG_INF;
    if (parts > 1) {
        float mx = NEG_INF;
        bool nan = false;
        for (int p = lane; p < parts; p += 32) mx = fmaxf(mx, s_lse[p][warp]), nan |= isnan(s_lse[p][warp]);
        for (int k = 16; k > 0; k /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, k));
        nan = __any_sync(0xffffffff, nan);
        float sum = 0.f;
        if (mx != NEG_INF)
            for (int p = lane; p < parts; p += 32) sum += exp2_approx((s_lse[p][warp] - mx) * LOG2E);
        for (int k = 16; k > 0; k /= 2) sum += __shfl_xor_sync(0xffffffff, sum, k);
        LSE = nan ? __int_as_float(0x7fc00000) : mx == NEG_INF ? NEG_INF : mx + logf(sum);
        constexpr int PER_LANE = HEAD_DIM / 32;  // 4 columns (d = 128) or 2 (d = 64) per lane
        float acc[PER_LANE] = {};
        for (int p = 0; p < parts; ++p) {
            const float w = LSE == NEG_INF ? 0.f : exp2_approx((s_lse[p][warp] - LSE) * LOG2E);
            const float* src = O_parts + ((long long)p * rows + row) * HEAD_DIM + lane * PER_LANE;
            if constexpr (PER_LANE == 4) {
                const float4 x = *reinterpret_cast<const float4*>(src);
                acc[0] += w * x.x, acc[1] += w * x.y, acc[2] += w * x.z, acc[3] += w * x.w;
            } else {
                const float2 x = *reinterpret_cast<const float2*>(src);
                acc[0] += w * x.x, acc[1] += w * x.y;
            }
        }
        elem_t* dst = O + row * HEAD_DIM + lane * PER_LANE;
        if constexpr (PER_LANE == 4) *reinterpret_cast<uint2*>(dst) = make_uint2(pack2(acc[0], acc[1]), pack2(acc[2], acc[3]));
        else *reinterpret_cast<u32*>(dst) = pack2(acc[0], acc[1]);
    }
    if (lane == 0) s_L[warp] = LSE;
    __syncthreads();
    if (tid < COMBINE_ROWS && s_parts[tid] > 1) L[first + tid] = s_L[tid];  // the block's L in one store
}
