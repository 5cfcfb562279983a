// 06_flash2_wgmma_tma.cu (rung 6, "v4"): the FlashAttention-2 forward on Hopper's own machinery, as
// FlashAttention-3 runs it: TMA copies, an mbarrier-synchronised ring of K_j/V_j stages, wgmma, a producer
// warpgroup and consumer warpgroups, and softmax of one block overlapped with the matmuls of the next.
//
// Changed from rung 3 (03_flash2_lane_offsets.cu), the same algorithm (Algorithm 1 of FlashAttention-2):
//  - loads. One thread of a producer warpgroup issues every copy HBM → SRAM, a whole tile per instruction
//    (cp.async.bulk.tensor, "TMA"), into STAGES stages of K_j and V_j; a copy completes on an mbarrier that the
//    consumers wait on, and the consumers' arrivals on a second barrier hand the stage back. Rung 3's 128
//    threads each computed addresses and issued cp.async for their share of every tile, then all waited at
//    __syncthreads.
//  - matmuls. wgmma: each consumer warpgroup (128 threads) owns 64 query rows; S_ij = Q_i K_jᵀ reads both
//    operands from SRAM (no ldmatrix), O_i += P̃_ij V_j takes P̃_ij from registers. Rung 3 issued mma.sync
//    m16n8k16 per warp, each fed by ldmatrix.
//  - overlap. A consumer issues S_i,j+1 = Q_i K_j+1ᵀ and O_i += P̃_ij V_j back to back, then runs the softmax of
//    S_i,j+1 while O_i += P̃_ij V_j still runs on the tensor cores (FlashAttention-3's intra-warpgroup pipelining).
//  - layout. TMA writes the 128-byte swizzled layout wgmma reads; a row of d = 128 is two 64-column pieces.
//  - output. O_i goes from registers to HBM, 16 bytes per lane after the 4 lanes of a row swap their pieces (rung 3
//    staged O_i in SRAM). Tried first: 4 bytes per lane, which wrote ×1.52 of O's bytes at L2 (half-filled 32-byte
//    sectors; `flashsim compare`, run 15); then SRAM and TMA stores, ×1.000 but d = 128 8% slower (ncu 948 against
//    879 µs, run 16): with one thread block per SM, its tail of barrier, fence, store and wait held the SM.
//  - registers. setmaxnreg: the producer drops to REG_PRODUCER, the consumers rise to REG_CONSUMER.
//  - tiles. PERSISTENT: one thread block per SM walks a share of the tiles (below).
// Only d = 64 and 128 (whole 128-byte pieces), fp16/bf16, sm_90a; other head dims and GPUs use rung 3.
//
// Measured (NVIDIA H100 80GB HBM3, gpu/NOTES.md runs 13–18; N = 4096, 16k tokens, TFLOP/s full / causal):
//  - correct at its first run (tests/test_gpu_hopper.py: 43 cases, ragged, causal, N ≠ Nk, fp16 and bf16);
//    compute-sanitizer memcheck and racecheck clean (run 18).
//  - stages: d = 128, two stages 472 / 400, three 611 / 522 (run 13): with two, K_j+2 can only load once block j
//    is done, while S_i,j+1 is already queued: the producer never runs ahead. d = 64: three consumer warpgroups taking turns
//    (PINGPONG, Br = 192) 456 / 365 against two without turns 349 / 191 (run 14). Rung 3 in the same ladder run
//    (run 17, N = 2048): d = 64 317 / 257, d = 128 324 / 260; rung 6 416 / 309 and 538 / 434.
//  - `flashsim bench gpu` (run 18, the public call): 1.34–2.12× SDPA flash for N ≥ 4096, up to 630 TFLOP/s (64% of
//    the H100's 989 dense); d = 64 is bound by the exponentials (MUFU 54% busy, tensor pipe 52%), d = 128 by the
//    tensor pipe (71% busy) and the waits between softmax and the next matmul (ncu, run 17).
//  - failures: a branch around the loop's wgmma made ptxas serialize them all (warning C7514; fixed by peeling
//    the last block); O_i by 4-byte stores wrote ×1.52 of its bytes, by TMA stores cost 8% (see "output").
//
// Persistent (issue 23 item 3, run 35; PERSISTENT, the default for plain and GQA calls): at most one thread block
// per SM, each walking tiles gridDim.x apart (plane-major, so that the blocks at work share K, V in L2); causal in pairs of
// Q blocks (Tr − 1 − q, q) of about equal work, a static split without atomics. The ring's stage and phase counts run
// on across tiles, and a q_empty barrier lets the producer load the next Q_i once every S of the tile is issued and
// done, so that the next tile's Q_i and first K_j, V_j arrive during this tile's last O_i += P̃ V and stores.
// Measured (H100, fp16, 16k tokens, ×cuDNN, two runs): d = 64 0.96–1.19 full, 0.75–1.10 causal (non-persistent
// 0.76–1.12, 0.63–1.07); d = 128 0.87–1.03 full, 0.93–1.15 causal (0.75–1.02, 0.73–1.11): +13 … +28% at N = 1024,
// +2 … +11% at N = 16384. Br = 128 with turns at N ≤ 2048 (geometry.forward_wg_shape_tiles) adds 0 … +11% there.
// `flashsim bench gpu` (run 35, 40 shapes): 0.81–1.15× cuDNN (median 1.00; below 0.9 at d = 64 causal N ≤ 2048 and
// d = 128 full N = 1024), 1.32–2.23× SDPA flash; GQA 0.82–1.13× cuDNN; memcheck and racecheck clean.
// Failures, measured and dropped (run 35):
//  - part of exp2 by polynomial on the FMA units (FlashAttention-4's; Cody–Waite + degree 3, relative error 7.5e-5):
//    a quarter of the exponentials −11 … −18%, half −19 … −29% at d = 64, a quarter −9 … −23% at d = 128. On the
//    H100 a polynomial costs ~8 issue slots against MUFU's one; our reading: the issue slots, not MUFU alone, bound.
//  - one stream of K/V blocks through the tiles (the next tile's first S issued beside this tile's last O_i += P̃ V,
//    its softmax overlapping it, the stores after): correct, but −9 … −16% against the persistent kernel above even
//    at N = 16384, where tile ends are rare: the loop body itself got slower (ptxas gave no warning and no spill at
//    d = 128; the SASS was not read). The 192-row build spilled 56 bytes.
//
// Variants (issue 25; variants.cuh, gpu/variants.py): GQA, window, ALiBi, softcap and packed batches, each behind a
// #define the launcher adds only for a call that uses it (VARIANTS, SOFTCAP, ALIBI, VARLEN): the plain build is the
// kernel above (its PTX differs by the order of 3 address instructions). Measured (run 31): 169 tests correct,
// sanitizers clean, reads ×1.000–1.003 of the simulator's closed form (window block skipping included), GQA at the
// plain kernel's speed (0.87–0.99× cuDNN's enable_gqa), window 1024 1.07–1.42× FlexAttention.
// Run 35: the variant mask (score_block) is written from per-lane offsets: with per-score integer arithmetic and
// int → float conversions ptxas spilled at d = 64 (ALiBi 4 bytes a thread, softcap + ALiBi 104), and the 4-byte
// spill store reached L2 (writes ×1.062 of the prediction); now no variant build spills and ALiBi writes ×1.000. The
// packed build stores O through store_16 (NVVM had split one 16-byte store in four; writes ×1.17–1.24). Tried and
// reverted: a packed grid (Hq, B, Tr) with the Q blocks outermost (heaviest causal blocks of every sequence first):
// concurrent blocks then read different heads' K/V, DRAM reads ×3.3 (d = 64) and ×5.5 (d = 128), 2–35% slower.
// Run 36: the persistent build had the same split store in two of its four copies of O's store (PTX: 16
// st.global.u32), and `flashsim compare --n 1024 --d 64 --causal` wrote ×1.776 of the predicted bytes; every build
// now stores O through store_16 (common.cuh; a CPU test reads the PTX). Compiled and checked on the CPU only: not yet
// run on a GPU (the session's device time was spent), so its effect on writes and time is not measured.
// Run 45 (the packed build at d = 128, one sequence against the plain build on the same values): ×1.19–1.28 the
// plain build's time. ncu's SASS: the consumer's loop is the window build's instruction for instruction, but the
// packed build worked its stages' wgmma descriptors out per thread (LEA/LOP3/SHF, then R2UR each) where the plain
// build keeps them on the uniform datapath: N and Nk came from loads of cu_q, cu_k, which ptxas cannot tell are the
// same across the warp; divergent branches 557 K against 37 K. Broadcasting the two by __shfl_sync from lane 0
// (CUTLASS's way of showing a value warp-uniform): ×1.15–1.23 (d = 64 ×1.05 → ×1.05); `bench_variants --only varlen`
// d = 128 1.42–1.43 → 1.45–1.49× at N = 4096, 1.28–1.34 → 1.34–1.36× at 8192. The same for the lone producer thread
// (a one-lane shuffle) spilled 4 bytes at d = 128: not kept. What is left of the gap is not found.
// Run 46 (ncu's SASS, d = 128, N = 16384, one sequence): the rest of the gap is the consumer loop, 572 instructions a
// K/V block against the plain build's 538. Its stage counter `used` lives in vector registers, so each wgmma
// descriptor is VIADD/LOP3/SHF then R2UR (48 R2UR a block against 17; ULOP3/USHF/UIADD3 in the plain build), because
// the packed build's Tc comes from loaded lengths. redux.sync (REDUX writes a uniform register) on N and Nk and on
// the ring's (i, plane), for the packed build only: N = 4096 causal ×1.22–1.25 → ×1.13–1.15 the plain build's time
// (three H200 machines and the H100), the rest within 2% (d = 128 ×1.15–1.16, d = 64 ×1.05 / ×1.15 causal). The
// loop itself does not change: ptxas copies REDUX's result to a vector register. Tried and dropped: __syncwarp()
// before the redux (no BRA.DIV then, the same loop); redux.sync on Tc and j0 (×1.37, slower). Run 45's divergent
// branches (557 K) are not the loop's: they are the packed epilogue's store of O_i from registers, 34 lane-selects a
// warp a tile (the plain build stores O_i by TMA).
// Run 37-fwd3 (issue 23, N = 1024): O_TMA, in the persistent walk at Br ≤ Bc (d = 128; d = 64 causal at N ≤ 2048): O_i
// leaves through SRAM, each warpgroup's 64 rows written into the tile's last K_j buffer (once every warpgroup's last S
// has read it: q_empty's phase) in TMA's swizzled layout, one TMA store a 64-column piece, the stage freed for the
// producer once the copy has read it; and each tile's Q_i is prefetched into L2 before the producer waits for its
// buffer. Why: SM clocks at each step of thread block 0's tiles (d = 128, N = 1024, 8 K/V blocks a tile) had the
// epilogue at 4650 clocks a tile, the loop 18200, and a build that left O unstored ran 25% faster (255 → 193 µs),
// its loop too (13760). Measured (H100, fp16, ×cuDNN in the same rounds): d = 128 N = 1024 full 0.86 → 0.96, causal
// 0.92 → 1.05; N = 4096 full 0.97 → 1.00; N = 16384 causal 1.05 → 1.12; d = 64 causal N = 1024 0.85 → 0.88 (one
// sweep; the final one, fp16 / bf16, d = 128 N = 1024 full 0.90 → 0.94 / 0.91 → 0.95, d = 64 causal 0.83–0.88). Tried and
// dropped (±2%): the first S and last O += P̃V under the turns too; two Q_i buffers; one consumer warpgroup and two
// thread blocks an SM; Bc = 64 (−15%); two stages with two Q_i buffers at d = 128 (−22%).
//
// Run 38-var3 (issue 25's speed lines): the variants persistent too. GQA alone runs the plain build with GROUP
// (query plane p reads K/V plane p / GROUP; the plain builds' PTX is byte-identical): the VARIANTS build's mask and
// window arithmetic had cost it 1–6% against the plain kernel (run 38). Windows and packed batches walk as the
// plain kernel does; a packed batch's blocks walk the host's list of units (gpu/flash.py, packed_units: each
// sequence's pairs by its own Tr, dealt heaviest first to the least-loaded block, −1 rows for none) and store O_i
// from registers (a TMA box would cross into the next sequence: no O_TMA with VARLEN). Softcap and ALiBi keep one
// thread block per tile: persistent, their d = 64 builds spilled (softcap 124 bytes a thread, ALiBi 16). Failure,
// compiled and dropped: a packed walk that found each unit's sequence from cu_q on the device spilled 188 bytes at
// d = 64 (and 28 at d = 128, the producer's 24 registers). Measured: gpu/NOTES.md, run 38-var3.
//
// Run 39-fwd4 (issue 23, d = 64 causal at N = 1024): two changes that pay only together. WALK (causal, plain and GQA
// calls): the thread blocks walk a list the host builds (sim/machine/grids.py, causal_walk): the plain walk's pairs for all
// whole rounds but the last, then the remaining tiles one by one, heaviest first, each to the block with the least
// work so far (2048 pairs on 132 blocks were 15.5 rounds: half the blocks idle through the last one). O_BUF (d = 64):
// O_i leaves through an SRAM buffer of its own (Br rows after the stages) instead of the tile's last K_j buffer, so a
// warpgroup neither waits for the other's last S (q_empty) nor holds the stage until its store has read it; the
// buffer is reused once the previous tile's store has read it (the warpgroup meets after that wait); Br = 192 now
// stores by TMA too. Measured (H100, ×cuDNN in the same rounds, fp16 / bf16): d = 64 causal N = 1024 0.895 / 0.902
// (run 38's walk and K_j buffer) → 0.936 / 0.943, N = 2048 0.936 / 0.940 → 0.983 / 0.987; the walk alone 0.883 /
// 0.890, the buffer alone −3.7 … +0.2% (fp16); Br = 192 against stores from registers: N = 4096 causal 1.025 →
// 1.067, N = 1024 full 0.946 → 0.982. Failures, measured and dropped: HALF_KEYS (a warpgroup whose rows see none of
// a block's last 64 keys skipping their exponentials and half of O_i += P̃V; the causal diagonal at Br = Bc) −6% at
// N = 1024 and −13% at Br = 192, N = 4096, with no spill and no C7514: the two-way softmax in the loop cost more than
// the exponentials it saved; freeing the K_j buffer O_i left through at the next tile's first S instead of after
// the store has read it (d = 128): N = 1024 full 0.935 → 0.994 but N = 4096 full 0.995 → 0.920.
//
// Run 42-sched15 (issue 22's DRAM line): TICKETS, a dynamic tile scheduler (FlashAttention-3's). The static split let
// the blocks drift: paces ±0.24–0.52% apart put the 132 blocks 1–2 tiles apart by the last rounds (run 41-dram12), the
// units at work spread over ~5 planes of K/V (8 MiB a plane at d = 128, N = 16384), more than L2 keeps of lines every
// SM reads (~25 MiB), and K/V came again from DRAM. Now a block takes the next unit of the same order (the full walk's
// plane-major units, the causal WALK list, the packed units; the host's lists without their −1 rows) from a ticket,
// an atomicAdd on a counter of the launcher's (one pair per plan, i.e. shape and stream; the last block out sets it
// back to 0), once its producer has issued the current unit's last copy; the producer hands each tile to the
// consumers through a ring of two (i, plane) slots in SRAM, written before its arrival on q_full; a tile without keys
// is handed out too and plane −1 stops everybody. The units at work are then ~grid consecutive units, as the model's
// lockstep plays them. Measured (H100, fp16, against the static walk in the same process; gpu/NOTES.md run
// 42-sched15): d = 128, N = 16384, 8 × 16 heads, DRAM read per launch 2365 → 1566 MiB full (the model 1536), 2278 →
// 1810 causal (1960.8), 1 × 16 212 → 204 (192); time at d = 128, N ≥ 4096 +2.0 … +4.8% (GQA, 8 query heads a K/V
// head, +2.6 … +4.6%); outputs bit for bit the static walk's. Kept only there (gpu/geometry.py, tickets: d = 128 without turns, N > 2048):
// the ticketed build measured −3% at d = 64, N ≥ 4096 (where the static walk read each byte once already: 776 against
// 768 MiB) and −5 … −7% at N = 1024; every other build is the static walk, its PTX unchanged by this run.
// Failures, measured and dropped: the ticket taken one unit ahead (its round trip surely hidden) −3 … −4% causal at
// d = 128 against the ticket taken after the unit's last copy (a block that holds a unit it has not started lengthens
// the tail), and 4–8 bytes of spill in the producer's 24 registers (GQA, window builds); two copies of the
// consumers' tile code (full and causal, as `for_each_tile` gives the static walk) recovered N = 1024 (0.95 → 1.00 of
// the static walk) but measured d = 128, N = 16384 at 0.97 (another card) and left d = 64 at −3%; the static walk
// through the same ring (no tickets) −2% at d = 64, N ≥ 4096: there the ring's code costs, not the order.
// Run 42 (lead): memcheck 0 errors; racecheck reports a write-after-read on the ring (d = 128, N = 2176 and 2600 ×
// 1000 causal; 298 reports with --racecheck-report all): a consumer thread reads slot t (flash2_v4_fwd+0x450), the
// producer rewrites it for tile t + 2 (+0xd510) after its wait on q_empty, which each warpgroup's thread 0 alone
// arrives on once the warpgroup's S of tile t + 1 is done. The other threads' reads are ordered before that arrival
// by the warpgroup's collective wgmma of tile t + 1 (no warp issues it before it has read slot t + 1 and used slot
// t's value), not by the PTX memory model: no wrong result can follow (a read whose value is used is done), but the
// report stands. Run 43 (lead; gpu/NOTES.md run 43; each against run 42's kernel in one process, interleaved, at
// d = 128, N 4096–16384, full and causal, plain and GQA, H100), four orders: every warpgroup meeting (bar.sync,
// 128) after its read, then thread 0's arrival: 0.96–0.99× run 42's speed, racecheck still 306 reports; a named
// barrier a slot (each consumer thread bar.arrive after its read, the producer barrier.sync before its rewrite):
// racecheck, synccheck, memcheck clean, 0.79–0.85×; every consumer thread arriving on q_empty itself (256 arrivals
// a phase): clean, 0.80–0.87× (why so much: not measured); **kept**: each consumer warp meets (bar.warp.sync, which
// orders its lanes' memory operations) and its lane 0 arrives on q_empty (8 arrivals a phase, `empty_q`), so every
// read of a slot is ordered before its rewrite in the PTX memory model: 0.990–1.002×, synccheck and memcheck clean,
// the 69 rung 6 GPU tests pass; racecheck still reports 298, as it reports the same order in isolation
// (gpu/lab/racecheck_probe.py, HANDOFF 4: 9 reports, as many as the unordered hand-off; the mbarrier, bar.sync and
// named-barrier orders 0): racecheck does not follow bar.warp.sync. (The bar.sync order, 0 in isolation, is reported
// in the kernel: not explained.)
// Run 44 (lead): **kept**, lane 0 of each consumer warp alone reads the slot and hands (i, plane) to its warp by two
// shuffles; the same lane 0 arrives on q_empty (8 a phase, no bar.warp.sync), so each read of a slot precedes its
// reader's own arrival in program order: racecheck 0 hazards on the ticketed builds (d = 128, N 2176 and 2600 ×
// 1000, full and causal; was 298), synccheck and memcheck 0, the rung 6 GPU tests pass, outputs bit for bit the
// per-warp order's; 0.980–1.029× its speed over two runs (d = 128, N 4096–16384, plain and GQA; racecheck_probe HANDOFF 5: 0).
//
// Injected #defines: HEAD_DIM (64 or 128), BC (Bc: keys per block, 64 or 128: the wgmma widths hopper.cuh wraps),
// CONSUMERS (consumer warpgroups; Br = 64 · CONSUMERS), STAGES (K_j/V_j stages in SRAM), PINGPONG (consumer
// warpgroups take turns at the tensor cores), PERSISTENT (one thread block per SM walks the tiles; with VARLEN, the
// host's units: the kernel then takes them and their count after the variant arguments), O_TMA (O_i stored by TMA:
// persistent, Br ≤ Bc or O_BUF, not with VARLEN; the kernel then takes O's tensor map last), O_BUF (O_i's own SRAM
// buffer), WALK (the host's list of units, causal; the kernel then takes it and its count), GROUP (GQA alone: Hq / Hkv,
// without VARIANTS), TICKETS (PERSISTENT: the blocks take their units from the launcher's tickets; the kernel then takes
// the number of units (after the list, or alone) and the tickets), STORAGE (1 fp16, 2 bf16).

#define BR (64 * CONSUMERS)               // Br: query rows per thread block
#define NTHREADS (128 * (CONSUMERS + 1))  // warpgroup 0 loads, warpgroups 1 … CONSUMERS compute
#define PIECES (HEAD_DIM / 64)            // 64-column pieces of a row: one 128-byte swizzled TMA box each
#define TILE_Q (BR * HEAD_DIM * 2)        // bytes of Q_i in SRAM
#define TILE_KV (BC * HEAD_DIM * 2)       // bytes of one stage of K_j (or of V_j) in SRAM
#define NS (BC / 2)                       // S_ij accumulators per thread: 64 × Bc over a warpgroup's 128 threads
#define NO (HEAD_DIM / 2)                 // O_i accumulators per thread
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef GROUP
#define GROUP 1  // GQA alone, in the plain build: query plane p reads K/V plane p / GROUP (the variant build: `group`)
#endif
#ifndef O_TMA
#define O_TMA 0  // O_i leaves through SRAM (the tile's last K_j buffer, or O_BUF's) by TMA stores (persistent)
#endif
#ifndef O_BUF
#define O_BUF 0  // O_TMA: O_i goes through an SRAM buffer of its own (Br rows), not the tile's last K_j buffer
#endif
#ifndef WALK
#define WALK 0  // PERSISTENT, causal: the thread blocks walk the host's list of units (sim/machine/grids.py, causal_walk)
#endif
#ifndef TICKETS
#define TICKETS 0  // PERSISTENT: the thread blocks take their units from a ticket (`take`), not b, b + grid, …
#endif
#if TICKETS && !PERSISTENT
#error "TICKETS: the persistent walk's"
#endif
#define REG_PRODUCER 24
#define REG_CONSUMER (CONSUMERS == 2 ? 240 : 160)  // 128 · 24 + 128 · CONSUMERS · REG_CONSUMER ≤ 65536

#include "common.cuh"  // NEG_INF, LN2, pack2, exp2_approx, accumulators_to_a
#include "hopper.cuh"  // TMA, mbarrier, wgmma, setmaxnreg
#include "variants.cuh"  // GQA, window, ALiBi, softcap, packed sequences: only what the launcher's #defines ask for
#ifndef VARIANT_PARAMS
#define VARIANT_PARAMS
#endif

// S = Q_i K_jᵀ for one warpgroup's 64 rows: HEAD_DIM / 16 wgmma k-steps, both operands read from SRAM, issued
// and committed as one group. A k-step moves 32 bytes along a 128-byte row: the descriptor's start address.
__device__ __forceinline__ void issue_scores(float (&s)[NS], u32 q_rows, u32 k_tile) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
        const u32 at = (kk % 4) * 32;  // the k-step's 32 bytes within the piece
        wgmma_ss(s, sw128_desc(q_rows + (kk / 4) * BR * 128 + at, 16), sw128_desc(k_tile + (kk / 4) * BC * 128 + at, 16), kk > 0);
    }
    wgmma_commit();
}

// O_i += P̃_ij V_j: Bc / 16 k-steps, P̃_ij's A fragments from registers, V_j (N-major: its rows are the keys)
// from SRAM; a k-step moves 16 rows (2048 bytes), 64-column pieces of V_j sit Bc · 128 bytes apart
__device__ __forceinline__ void issue_values(float (&o)[NO], const u32 (&p)[BC / 16][4], u32 v_tile) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) wgmma_rs(o, p[kk], sw128_desc(v_tile + kk * 2048, BC * 128));
    wgmma_commit();
}

// keys past Nk (the ragged last block) and, causal, keys c > r + shift get −∞; only blocks that reach either are
// touched. `row` is this lane's first row, r0 the thread block's.
__device__ __forceinline__ void mask(float (&s)[NS], int c0, int row, int r0, int Nk, int causal, int shift, int t) {
    if (c0 + BC <= Nk && !(causal && c0 + BC - 1 > r0 + shift)) return;
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = c0 + n * 8 + 2 * t + (e & 1);
            if (c >= Nk || (causal && c > row + (e >> 1) * 8 + shift)) s[4 * n + e] = NEG_INF;
        }
}

#if VARIANTS
// the variant build's mask: softcap and ALiBi (SCORED: the scores to base 2 first), then −∞ for keys past Nk or
// outside the window; a block every row of the thread block sees in full skips the mask. Written from this lane's
// offsets: its key 8n + (e & 1) + c0 + 2t and row r = row + 8h have r + shift − c = x_h − k with k = 8n + (e & 1) a
// constant, so each score costs compares and one subtraction against constants (run 35: per-score integer
// arithmetic and int → float conversions spilled a register at d = 64 with ALiBi, 4 bytes a thread written to L2)
__device__ __forceinline__ void score_block(float (&s)[NS], int c0, int row, int r0, const Band& w, int t) {
    const bool full = fully_seen(c0, r0, r0 + BR - 1, w.Nk, w.shift, w.left, w.right);
    if (!SCORED && full) return;
    const int keys = w.Nk - c0 - 2 * t;  // k < keys: the key exists
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int x = row + 8 * h + w.shift - c0 - 2 * t;  // r + shift − c at k = 0; visible iff −right ≤ x − k ≤ left
        const int lo = x - w.left, hi = x + w.right;      // visible iff lo ≤ k ≤ hi (|x| < 2^22, sides ≤ 2^30)
#if ALIBI
        const float bias_x = (float)x;  // exact: |x| < 2^24
#endif
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int k = 8 * n + e;
                float& v = s[4 * n + 2 * h + e];
#if SCORED
                v *= w.scale_log2;
#if SOFTCAP
                v = softcap_log2(v, w.cap, w.inv_cap);
#endif
#if ALIBI
                v -= w.slope * fabsf(bias_x - (float)k);
#endif
#endif
                if (!full && (k >= keys || k < lo || k > hi)) v = NEG_INF;
            }
    }
}
#endif

// line 9: m_i^(j) = max(m_i^(j−1), rowmax(S_ij)), P̃_ij = exp(S_ij − m_i^(j)) in place of S_ij,
// ℓ_i^(j) = e^{m_i^(j−1) − m_i^(j)} ℓ_i^(j−1) + rowsum(P̃_ij); base 2 with the scale folded in. `alpha` gets
// e^{m_i^(j−1) − m_i^(j)} for line 10's rescaling of O_i. A lane holds rows g (h = 0) and g + 8 (h = 1).
__device__ __forceinline__ void online_softmax(float (&s)[NS], float (&m)[2], float (&l)[2], float (&alpha)[2], float scale_log2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float m_new = m[h];
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) m_new = fmaxf(m_new, fmaxf(s[4 * n + 2 * h], s[4 * n + 2 * h + 1]));
        m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffff, m_new, 1));  // the 4 lanes of a row
        m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffff, m_new, 2));
        const float m_scaled = m_new == NEG_INF ? 0.f : m_new * scale_log2;  // a row with no key yet: P̃ = 0, not NaN
        alpha[h] = exp2_approx(m[h] * scale_log2 - m_scaled);
        m[h] = m_new;
        float rowsum = 0.f;
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 2 * h; e < 2 * h + 2; ++e) {
                s[4 * n + e] = exp2_approx(fmaf(s[4 * n + e], scale_log2, -m_scaled));
                rowsum += s[4 * n + e];
            }
        l[h] = alpha[h] * l[h] + rowsum;  // this lane's partial ℓ; the 4 partials are summed at line 12
    }
}

// P̃_ij (fp32, in S_ij's accumulators) → the A fragments of O_i += P̃_ij V_j: key columns 16·kk … 16·kk + 15 are
// accumulator n-tiles 2·kk and 2·kk + 1, the same correspondence as mma.sync's (common.cuh)
__device__ __forceinline__ void to_fragments(u32 (&p)[BC / 16][4], const float (&s)[NS]) {
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) accumulators_to_a(p[kk], s + 8 * kk, s + 8 * kk + 4);
}

// FlashAttention-3's ping-pong (PINGPONG = 1): the consumer warpgroups take turns issuing their matmuls, so that
// one's softmax runs while another's matmuls hold the tensor cores. Named barrier 1 + c opens warpgroup c's turn
// (256 threads: its own 128 waiting, its predecessor's 128 arriving); warpgroup c passes the turn to c + 1.
__device__ __forceinline__ void turn_wait(int c) { asm volatile("bar.sync %0, 256;\n" ::"r"(1 + c) : "memory"); }
__device__ __forceinline__ void turn_pass(int c) { asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (c + 1) % CONSUMERS) : "memory"); }

#define K_FULL(s) (bar + 8 * (2 + (s)))               // mbarrier: K_j has arrived in stage s
#define V_FULL(s) (bar + 8 * (2 + STAGES + (s)))      // mbarrier: V_j has arrived in stage s
#define EMPTY(s) (bar + 8 * (2 + 2 * STAGES + (s)))   // mbarrier: every consumer is done with stage s

// The K/V blocks the rows r0 … r0 + Br − 1 of a thread block's tile read: j0 … j0 + Tc − 1; all of them, or
// (causal) up to the last one that row min(r0 + Br, N) − 1 sees, or (VARIANTS) the window's band, causal folded in
__device__ __forceinline__ void kv_blocks(int& j0, int& Tc, int r0, int N, int Nk, int causal, int left, int right) {
    const int shift = Nk - N;
    j0 = 0, Tc = (Nk + BC - 1) / BC;
#if VARIANTS
    seen_blocks(j0, Tc, r0, min(r0 + BR, N) - 1, Nk, shift, left, right);
    Tc = max(0, Tc - j0);
#else
    if (causal) {
        const int last_key = min(r0 + BR, N) - 1 + shift;
        Tc = last_key < 0 ? 0 : min(Tc, last_key / BC + 1);
    }
#endif
}

// The tiles (i, plane) a thread block computes, in order: body(i, plane) for each. One launch per tile: the tile
// of (blockIdx.x, blockIdx.y), causal the longest rows first. PERSISTENT: one thread block per SM walks the tiles
// gridDim.x apart in plane-major order (the blocks at work at once share K and V in L2); causal, a unit is the pair
// of Q blocks Tr − 1 − q and q of one plane, the longer first, whose K/V blocks add up to about the same number
// for every q, so that a static split is even (a lone middle block when Tr is odd).
template <class Body>
__device__ __forceinline__ void for_each_tile(int N, int causal, int planes, const int4* units, int n_units, Body&& body) {
#if PERSISTENT && (VARLEN || WALK)
    // a packed batch: the host's list of units (b·Hq + h, first tile, second tile or −1; b·Hq + h = −1: none), each
    // sequence's pairs by its own Tr, dealt to the thread blocks heaviest first (gpu/flash.py, packed_units); a walk
    // that found each unit's sequence from cu_q itself spilled 188 bytes a thread at d = 64. WALK (causal): the
    // plain walk's pairs but for its last rounds, whose tiles the host deals one by one (sim/machine/grids.py, causal_walk)
    for (int u = blockIdx.x; u < n_units; u += gridDim.x) {
        const int4 unit = units[u];
        if (unit.x < 0) continue;
        body(unit.y, unit.x);
        if (unit.z >= 0) body(unit.z, unit.x);
    }
#elif PERSISTENT
    const int Tr = (N + BR - 1) / BR, per_plane = causal ? (Tr + 1) / 2 : Tr;
    for (int u = blockIdx.x; u < planes * per_plane; u += gridDim.x) {
        const int plane = u / per_plane, q = u % per_plane;
        if (!causal) {
            body(q, plane);
            continue;
        }
        body(Tr - 1 - q, plane);
        if (q != Tr - 1 - q) body(q, plane);
    }
#else
    body(causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x, blockIdx.y);
#endif
}

// TICKETS: unit u's tiles (i, plane), in order, units numbered as for_each_tile walks them (0 … n_units − 1, the
// host counts them): body(i, plane) for each
template <class Body>
__device__ __forceinline__ void unit_tiles(int u, int N, int causal, const int4* units, Body&& body) {
#if VARLEN || WALK
    const int4 unit = units[u];  // the host's list, without the −1 rows (gpu/flash.py, _taken_in_order)
    body(unit.y, unit.x);
    if (unit.z >= 0) body(unit.z, unit.x);
#else
    const int Tr = (N + BR - 1) / BR, per_plane = causal ? (Tr + 1) / 2 : Tr;
    const int plane = u / per_plane, q = u % per_plane;
    if (!causal) {
        body(q, plane);
        return;
    }
    body(Tr - 1 - q, plane);
    if (q != Tr - 1 - q) body(q, plane);
#endif
}

// The tickets (TICKETS; the launcher's workspace, one pair per shape and stream, zero at the launch): [0] the
// next unit to take, [1] the thread blocks done taking. A block takes the next unit when it is ready for one, so the
// units at work at any moment are about gridDim.x consecutive units of the walk, whatever the blocks' paces (a
// static split, block b taking units b, b + grid, …, let blocks that run 0.2–0.5% slower fall 1–2 tiles behind by
// the last rounds, the units at work spread over ~5 planes, and K/V were read again from DRAM: run 41-dram12).
__device__ __forceinline__ int take(unsigned* tickets) { return (int)atomicAdd(tickets, 1u); }

// a thread block has taken its last ticket (one past the end); the last block to get here sets both back to 0 for
// the next launch on the stream (a CUDA graph's replay too): no block takes a ticket after it has counted itself out
__device__ __forceinline__ void retire(unsigned* tickets) {
    __threadfence();  // this block's tickets are taken before its count
    if (atomicAdd(tickets + 1, 1u) == gridDim.x - 1) {
        __threadfence();
        atomicExch(tickets, 0u);
        atomicExch(tickets + 1, 0u);
    }
}

// Q_map, K_map, V_map: tensor maps of Q (batch·heads, N, HEAD_DIM) and K, V (batch·heads, Nk, HEAD_DIM), boxes of
// (1, Br or Bc, 64); O: like Q, L: (batch·heads, N); planes: batch·heads; O_map (O_TMA): O's, boxes of (1, 64, 64). Grid: (Tr, batch·heads), or PERSISTENT
// (at most one per SM), NTHREADS threads, 1024 + (1 + O_BUF) · TILE_Q + 2 · STAGES · TILE_KV + 8 · (2 + 3 · STAGES)
// (+ 16, TICKETS: the ring of tiles) bytes of dynamic shared memory. TICKETS: n_units, the walk's units (the list's
// length with WALK or VARLEN), and tickets, two unsigned counters, zero at the launch (`take`, `retire`). VARIANTS: K, V have batch·heads / group planes; VARLEN: the maps are (Hq or Hkv planes,
// total rows, HEAD_DIM), O (total_q, Hq, HEAD_DIM), L (Hq, total_q), grid (Tr of the longest sequence, Hq, B). A box
// never stops at a sequence's end: rows of the next sequence are loaded, computed and never stored (queries) or
// masked (keys past Nk).
#if O_TMA
#if (64 * CONSUMERS > BC && !O_BUF) || !PERSISTENT
#error "O_TMA: O_i (Br rows) goes into one K_j buffer (Bc rows) or O_BUF's, in the persistent walk"
#endif
#define O_MAP_PARAM , const __grid_constant__ TensorMap O_map
#else
#define O_MAP_PARAM
#endif
#if O_TMA && VARLEN
#error "O_TMA: a box of 64 rows would run past a sequence's end into the next one's O"
#endif
#if TICKETS
#define TICKETS_PARAM , unsigned* __restrict__ tickets
#else
#define TICKETS_PARAM
#endif
#if PERSISTENT && (VARLEN || WALK)
#define UNITS_PARAM , const int4* __restrict__ units, int n_units TICKETS_PARAM
#elif TICKETS
#define UNITS_PARAM , int n_units TICKETS_PARAM
#else
#define UNITS_PARAM
#endif
extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
flash2_v4_fwd(const __grid_constant__ TensorMap Q_map, const __grid_constant__ TensorMap K_map,
              const __grid_constant__ TensorMap V_map, elem_t* __restrict__ O, float* __restrict__ L, int N, int Nk,
              float scale_log2, int causal, int planes VARIANT_PARAMS UNITS_PARAM O_MAP_PARAM)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 sQ = (smem_u32(smem) + 1023) & ~1023u;  // SRAM: Q_i, PIECES × (Br, 64); swizzling repeats every 1024 bytes
    const u32 sK = sQ + TILE_Q;                        // SRAM: K_j, STAGES × PIECES × (Bc, 64)
    const u32 sV = sK + STAGES * TILE_KV;              // SRAM: V_j, likewise
    const u32 sO = sV + STAGES * TILE_KV;              // SRAM (O_BUF): O_i on its way out, PIECES × (Br, 64)
    const u32 bar = sO + (O_BUF ? TILE_Q : 0);         // SRAM: the mbarriers, 8 bytes each
    const u32 q_full = bar;                            // mbarrier: Q_i has arrived
    const u32 q_empty = bar + 8;                       // mbarrier: every consumer is done with Q_i (the next may load)
    const u32 ring = bar + 8 * (2 + 3 * STAGES);       // SRAM (TICKETS): tile t's (i, plane) in slot t % 2, 8 bytes each
#if !VARIANTS
    const int left = 0, right = 0, group = GROUP;      // (the window's sides: the variant build's)
#endif
#if !(PERSISTENT && (VARLEN || WALK))
    const int4* units = nullptr;                       // (the host's list: WALK's, a packed batch's)
#endif
#if !(PERSISTENT && (VARLEN || WALK) || TICKETS)
    const int n_units = 0;
#endif

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        mbar_init(q_empty, TICKETS ? 4 * CONSUMERS : CONSUMERS);  // TICKETS: a warp's lane 0 each (empty_q)
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(K_FULL(s), 1);
            mbar_init(V_FULL(s), 1);
            mbar_init(EMPTY(s), CONSUMERS);
        }
        mbar_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: the warpgroups go their own ways from here

    // where plane's rows sit (plain: plane b·heads + h of Q, K, V); VARIANTS, one launch per tile: variants.cuh's
    // sequence() from blockIdx; PERSISTENT, a packed batch: plane b·Hq + h's sequence; else K/V plane / group
    auto seq_of = [&](int plane) -> Seq {
#if VARIANTS && !PERSISTENT
        return sequence(N, Nk, HEAD_DIM, cu_q, cu_k, group, heads);
#elif VARLEN
        return packed_sequence(plane / heads, plane % heads, planes / heads, HEAD_DIM, cu_q, cu_k, group, heads);
#else
        Seq sq = plain_seq(N, Nk, plane, HEAD_DIM);
        if (VARIANTS || GROUP > 1) {
            sq.kv_plane = plane / group;
            sq.kv_at = (size_t)sq.kv_plane * Nk * HEAD_DIM;
        }
        return sq;
#endif
    };

    // Both sides count what went through the ring since the launch: `loaded` / `used` K/V blocks (block n sits in
    // stage n % STAGES, its barriers in phase n / STAGES) and `tiles` Q tiles (q_full, q_empty in phase tiles)
    // TICKETS: the producer thread takes the units (`take`), the next once this unit's copies are all issued, so its
    // L2 round trip (~1 µs) hides behind the consumers' last STAGES K/V blocks of the unit. It hands each tile t to
    // the consumers through the ring: (i, plane) into slot t % 2, then its arrival on q_full (an mbarrier arrival
    // releases, the consumers' wait on its phase acquires: they read the slot after their wait). A slot is written
    // again for tile t + 2 once q_empty says every consumer warp is done with tile t + 1's S (a warp's lane 0 alone
    // reads the slot, hands it to the warp by shuffles and arrives after its read: empty_q). A tile without
    // keys is handed out too (q_full without bytes, the
    // consumers write zeros and −∞ and arrive on q_empty); plane −1 after the last unit is the stop sign.
    if (threadIdx.x < 128) {  // the producer warpgroup: one thread issues every copy (line 4 and line 7)
        setmaxnreg_dec<REG_PRODUCER>();
        if (threadIdx.x != 0) return;
        int loaded = 0, tiles = 0;
        auto produce = [&](int i, int plane) {
            const int r0 = i * BR;
            const Seq sq = seq_of(plane);
            if (VARLEN && r0 >= sq.N) return;  // this sequence is shorter than the longest
            int j0, Tc;
            kv_blocks(j0, Tc, r0, sq.N, sq.Nk, causal, left, right);
            if (!TICKETS && Tc == 0) return;  // no key: the consumers write zeros and −∞ without waiting
            if (PERSISTENT && (!TICKETS || Tc > 0))  // Q_i into L2 now, a tile ahead: its load below, once the previous Q_i is used up, hits there
#pragma unroll
                for (int p = 0; p < PIECES; ++p) tma_prefetch_3d(&Q_map, p * 64, sq.q_row + r0, sq.q_plane);
            if (tiles > 0) mbar_wait(q_empty, (tiles - 1) & 1);  // the previous tile's Q_i is used up
            if (TICKETS) st_shared_v2(ring + 8 * (tiles & 1), i, plane);
            ++tiles;
            if (TICKETS && Tc == 0) {
                mbar_arrive(q_full);
                return;
            }
            mbar_expect_tx(q_full, TILE_Q);
#pragma unroll
            for (int p = 0; p < PIECES; ++p) tma_load_3d(sQ + p * BR * 128, &Q_map, q_full, p * 64, sq.q_row + r0, sq.q_plane);
            for (int j = 0; j < Tc; ++j, ++loaded) {
                const int s = loaded % STAGES;
                if (loaded >= STAGES) mbar_wait(EMPTY(s), ((loaded / STAGES) & 1) ^ 1);  // block loaded − STAGES is used up
                mbar_expect_tx(K_FULL(s), TILE_KV);
#pragma unroll
                for (int p = 0; p < PIECES; ++p)
                    tma_load_3d(sK + s * TILE_KV + p * BC * 128, &K_map, K_FULL(s), p * 64, sq.kv_row + (j0 + j) * BC, sq.kv_plane);
                mbar_expect_tx(V_FULL(s), TILE_KV);
#pragma unroll
                for (int p = 0; p < PIECES; ++p)
                    tma_load_3d(sV + s * TILE_KV + p * BC * 128, &V_map, V_FULL(s), p * 64, sq.kv_row + (j0 + j) * BC, sq.kv_plane);
            }
        };
#if TICKETS
        for (int u = take(tickets); u < n_units; u = take(tickets)) unit_tiles(u, N, causal, units, produce);
        if (tiles > 0) mbar_wait(q_empty, (tiles - 1) & 1);  // the stop sign
        st_shared_v2(ring + 8 * (tiles & 1), 0, -1);
        mbar_arrive(q_full);
        retire(tickets);
#else
        for_each_tile(N, causal, planes, units, n_units, produce);
#endif
        return;
    }

    // a consumer warpgroup: 64 rows of Q_i; this lane holds rows g and g + 8 of its warp's 16, columns 2t, 2t + 1
    setmaxnreg_inc<REG_CONSUMER>();
    const int c = threadIdx.x / 128 - 1;
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    // q_empty's arrival: the static walk's, thread 0 of the warpgroup (its S is done: every warp issued it). TICKETS:
    // lane 0 of each warp, the one thread of the warp that read the ring's slot (its read comes before its arrival
    // in program order, and the arrival before the producer's rewrite of the slot for tile t + 2)
    auto empty_q = [&]() {
        if (TICKETS) {
            if (lane == 0) mbar_arrive(q_empty);
        } else if (tid == 0) {
            mbar_arrive(q_empty);
        }
    };
    const int g = lane / 4, t = lane % 4;
    const u32 q_rows = sQ + c * 64 * 128;  // this warpgroup's rows of Q_i, in each piece
    const float softmax_scale = SCORED ? 1.f : scale_log2;
    int used = 0, tiles = 0;
    if (PINGPONG && c == CONSUMERS - 1) turn_pass(c);  // the first turn is warpgroup 0's

    auto consume = [&](int i, int plane) {
        const int r0 = i * BR;
        Seq sq = seq_of(plane);
#if VARLEN
        // loaded from cu_q, cu_k (every lane the same words): made warp-uniform by redux.sync, so that ptxas may
        // keep the loop's counts and the stages' descriptors on its uniform datapath, as for the plain build's N and
        // Nk (run 45, a shuffle from lane 0: ×1.19–1.28 → ×1.15–1.23 the plain build's time at d = 128; run 46,
        // redux here and on the ring's slot: N = 4096 causal ×1.22–1.25 → ×1.13–1.15, the rest within 2%)
        sq.N = __reduce_max_sync(0xffffffffu, sq.N);
        sq.Nk = __reduce_max_sync(0xffffffffu, sq.Nk);
#endif
        if (!TICKETS && VARLEN && r0 >= sq.N) return;  // this sequence is shorter than the longest (before any barrier)
        const int n_rows = sq.N, n_keys = sq.Nk, shift = n_keys - n_rows;  // causal: query r sees key c iff c ≤ r + shift
        int j0, Tc;
        kv_blocks(j0, Tc, r0, n_rows, n_keys, causal, left, right);
        const int row = r0 + c * 64 + warp * 16 + g;  // this lane's first row in Q

        // line 5: O_i = 0, ℓ_i = 0, m_i = −∞, in registers
        float o[NO];
#pragma unroll
        for (int e = 0; e < NO; ++e) o[e] = 0.f;
        float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, alpha[2];
#if VARIANTS  // the line between S_ij and the softmax (score_block); SCORED scores are base 2 already
        const Band band = {n_keys, shift, left, right, scale_log2, cap, 1.f / cap, ALIBI ? slopes[sq.slope] : 0.f};
#define MASK(s, c0) score_block(s, c0, row, r0, band, t)
#else
#define MASK(s, c0) mask(s, c0, row, r0, n_keys, causal, shift, t)
#endif

        int o_stage = 0;  // O_TMA: the stage of the tile's last K_j, V_j (its K_j buffer takes O_i on the way out)
        if (Tc > 0) {
            float s[NS];        // registers: S_ij, then P̃_ij in place (fp32)
            u32 p[BC / 16][4];  // registers: P̃_ij rounded to fp16/bf16, as wgmma A fragments
            if (!TICKETS) mbar_wait(q_full, tiles & 1);  // (TICKETS: waited for with the tile's slot)
            mbar_wait(K_FULL(used % STAGES), (used / STAGES) & 1);
            issue_scores(s, q_rows, sK + (used % STAGES) * TILE_KV);  // line 8 for j = 0
            wgmma_wait<0>();
            keep(s);
            MASK(s, j0 * BC);
            online_softmax(s, m, l, alpha, softmax_scale);  // line 9 for j = 0 (O_i is still 0: alpha is not needed)

            // blocks 0 … Tc − 2: the tensor cores get S_i,j+1 = Q_i K_j+1ᵀ and O_i += P̃_ij V_j back to back; softmax
            // of S_i,j+1 runs while the second is in flight. (Written without a branch around the wgmma instructions:
            // with one, ptxas cannot tell which group a wait completes and serializes every wgmma, warning C7514.)
            for (int j = 0; j + 1 < Tc; ++j, ++used) {
                const int st = used % STAGES, sn = (used + 1) % STAGES;
                to_fragments(p, s);
                mbar_wait(K_FULL(sn), ((used + 1) / STAGES) & 1);
                if (PINGPONG) turn_wait(c);
                issue_scores(s, q_rows, sK + sn * TILE_KV);  // line 8 for j + 1
                mbar_wait(V_FULL(st), (used / STAGES) & 1);
                issue_values(o, p, sV + st * TILE_KV);       // line 10, second half: O_i += P̃_ij V_j
                if (PINGPONG) turn_pass(c);
                wgmma_wait<1>();                             // S_i,j+1 is done (groups complete in order)
                keep(s);
                MASK(s, (j0 + j + 1) * BC);
                online_softmax(s, m, l, alpha, softmax_scale);  // line 9 for j + 1
                wgmma_wait<0>();
                keep(o);
                keep(p);
                if (tid == 0) mbar_arrive(EMPTY(st));  // this warpgroup is done with K_j and V_j
#pragma unroll
                for (int n = 0; n < HEAD_DIM / 8; ++n) {  // line 10, first half, for j + 1: O_i ← diag(e^{m^(j) − m^(j+1)}) O_i
                    o[4 * n] *= alpha[0];
                    o[4 * n + 1] *= alpha[0];
                    o[4 * n + 2] *= alpha[1];
                    o[4 * n + 3] *= alpha[1];
                }
            }
            empty_q();  // every S_ij of the tile is done: the producer may load the next Q_i
            ++tiles;
            // block Tc − 1: line 10 alone
            const int last = used % STAGES;
            to_fragments(p, s);
            mbar_wait(V_FULL(last), (used / STAGES) & 1);
            issue_values(o, p, sV + last * TILE_KV);
            wgmma_wait<0>();
            keep(o);
            keep(p);
            if (tid == 0 && !(O_TMA && !O_BUF)) mbar_arrive(EMPTY(last));
            o_stage = last;
            ++used;
        } else if (TICKETS) {  // a tile without keys, handed out all the same
            empty_q();
            ++tiles;
        }
#undef MASK

        // line 12: O_i = diag(ℓ_i)^−1 O_i; line 13: L_i = m_i + log ℓ_i (natural log; −∞ and zeros for a row that saw
        // no key); lines 14 and 15: write O_i and L_i to HBM, while the producer already loads the next tile's Q_i
        // and K_j, V_j. O_TMA (a tile with keys): each lane writes its 4-byte pairs into the tile's last K_j buffer,
        // once every warpgroup's last S has read it (q_empty's phase), in TMA's 128-byte swizzled layout (row rr's
        // 16-byte chunk k at chunk k ^ (rr mod 8)); one thread then stores the warpgroup's 64 rows by TMA and frees
        // the stage when the copy has read it. Else, from registers: a lane holds 4 bytes of each 16-byte piece of
        // its rows; the 4 lanes of a row swap them (a 4 × 4 transpose by shuffles) so that each stores 16 bytes and
        // the four together whole 32-byte sectors.
        const bool via_sram = O_TMA && Tc > 0;
        // O_TMA: this warpgroup's 64 rows, pieces o_piece bytes apart. O_BUF: its own buffer, once the previous tile's
        // store has read it; else the tile's last K_j buffer, once every warpgroup's last S has read it
        const u32 o_tile = (O_BUF ? sO : sK + o_stage * TILE_KV) + c * 64 * 128, o_piece = (O_BUF ? BR : BC) * 128;
        if (via_sram && O_BUF) {
            if (tid == 0) bulk_wait_read<0>();
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + CONSUMERS + c) : "memory");
        } else if (via_sram) {
            mbar_wait(q_empty, (tiles - 1) & 1);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float l_row = l[h];
            l_row += __shfl_xor_sync(0xffffffff, l_row, 1);
            l_row += __shfl_xor_sync(0xffffffff, l_row, 2);
            const float inv = l_row == 0.f ? 0.f : 1.f / l_row;  // a NaN ℓ (NaN in the inputs) stays NaN
            const int r = row + 8 * h;
            if (via_sram) {
                const u32 rr = warp * 16 + g + 8 * h;  // the row in the warpgroup's 64
#pragma unroll
                for (int n = 0; n < HEAD_DIM / 8; ++n)  // columns 8n + 2t, 2t + 1: piece n / 8, chunk n % 8
                    st_shared_32(o_tile + (n / 8) * o_piece + rr * 128 + (((n % 8) ^ g) << 4) + 4 * t,
                                 pack2(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv));
            } else {
                elem_t* o_row = O + sq.q_at + (size_t)r * sq.q_stride;
#pragma unroll
                for (int q = 0; q < HEAD_DIM / 32; ++q) {  // columns 32q … 32q + 31: pieces n = 4q … 4q + 3
                    u32 w[4], x[4] = {0u, 0u, 0u, 0u};      // w[j]: columns 8(4q + j) + 2t, 2t + 1; x[i]: 8(4q + t) + 2i, 2i + 1
#pragma unroll
                    for (int j = 0; j < 4; ++j) w[j] = pack2(o[4 * (4 * q + j) + 2 * h] * inv, o[4 * (4 * q + j) + 2 * h + 1] * inv);
#pragma unroll
                    for (int k = 0; k < 4; ++k) {  // round k: read lane t + k's word for piece t, send lane t − k its piece
                        const int from = (t + k) & 3, wanted = (t - k) & 3;
                        const u32 send = wanted == 0 ? w[0] : wanted == 1 ? w[1] : wanted == 2 ? w[2] : w[3];
                        const u32 got = __shfl_sync(0xffffffff, send, (lane & ~3) | from);
#pragma unroll
                        for (int e = 0; e < 4; ++e) x[e] = from == e ? got : x[e];
                    }
                    // one st.global.v4 (common.cuh's store_16: NVVM split this store in the packed and persistent builds)
                    if (r < n_rows) store_16(o_row + 8 * (4 * q + t), make_uint4(x[0], x[1], x[2], x[3]));
                }
            }
            if (t == 0 && r < n_rows) L[sq.l_at + (size_t)r * sq.l_stride] = l_row == 0.f ? NEG_INF : (m[h] * softmax_scale + log2f(l_row)) * LN2;
        }
#if O_TMA
        if (via_sram) {  // the writes reach the async proxy, the warpgroup meets, one thread stores its 64 rows
            fence_proxy_async();
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + CONSUMERS + c) : "memory");  // ids 1 … CONSUMERS: PINGPONG's
            if (tid == 0) {
#pragma unroll
                for (int p = 0; p < PIECES; ++p) tma_store_3d(&O_map, o_tile + p * o_piece, p * 64, sq.q_row + r0 + c * 64, sq.q_plane);
                bulk_commit();
                if (!O_BUF) {
                    bulk_wait_read<0>();  // the copy has read the buffer: the producer may load K_j, V_j into the stage
                    mbar_arrive(EMPTY(o_stage));
                }
            }
        }
#endif
    };
#if TICKETS
    for (;;) {  // the producer's tiles, from the ring, to the stop sign
        mbar_wait(q_full, tiles & 1);
        int i = 0, plane = 0;
        if (lane == 0) ld_shared_v2(ring + 8 * (tiles & 1), i, plane);  // lane 0 alone reads the slot (SRAM) …
        i = __shfl_sync(0xffffffffu, i, 0);  // … and hands it to its warp in registers
        plane = __shfl_sync(0xffffffffu, plane, 0);
        if (VARLEN) {  // the same values, now where ptxas sees them warp-uniform (consume's lengths; run 46)
            i = __reduce_max_sync(0xffffffffu, i);
            plane = __reduce_max_sync(0xffffffffu, plane);
        }
        if (plane < 0) break;
        consume(i, plane);
    }
#else
    for_each_tile(N, causal, planes, units, n_units, consume);
#endif
#if O_TMA
    if (tid == 0) bulk_wait<0>();  // the last stores are done before the thread block ends
#endif
    if (PINGPONG && c == 0) turn_wait(c);  // the last warpgroup's last pass: every arrival is matched
}
