// 07_flash2_backward_wgmma.cu (rung 7, backward "wgmma"): FlashAttention-2's backward pass on Hopper's own
// machinery (TMA, mbarriers, wgmma, a producer warpgroup), the algorithm of rung 5 with rung 6's tools.
//
// Changed from rung 5 (05_flash2_backward_tensorcore.cu), the same algorithm (Algorithm 2 of FlashAttention-2,
// one thread block per K/V block, dK_j and dV_j in registers for the whole loop over Q blocks):
//  - loads. K_j and V_j arrive once by TMA; one thread of the producer warpgroup copies Q_i and dO_i for each
//    Q block into STAGES stages (128-byte swizzled boxes, the layout wgmma reads) and, by one plain bulk copy,
//    L_i·log2 e and D_i, which the pre-pass packs per Q block (backward_passes.cu); mbarriers count the bytes and
//    the consumers' arrivals hand each stage back. (First tried: each consumer warpgroup loading L_i and D_i
//    from HBM behind a barrier, every Q block: the load's latency stood in the loop; before that a producer warp
//    copying them with ordinary stores, which racecheck flagged.) Rung 5: 256 threads issuing cp.async.
//  - matmuls. Two consumer warpgroups of 64 keys each (Bc = 128), keys as the wgmma rows as in rung 5:
//    S_ijᵀ = K_j Q_iᵀ and dP_ijᵀ = V_j dO_iᵀ with both operands from SRAM; dV_j += P_ijᵀ dO_i and
//    dK_j += dS_ijᵀ Q_i with P_ijᵀ and dS_ijᵀ as A fragments from registers and dO_i, Q_i N-major from SRAM;
//    dQ_i = dS_ij K_j with dS_ij written to SRAM (by stmatrix.trans, swizzled, two buffers so that writing block
//    i + 1's waits for no reader of block i's) and K_j N-major. S_ijᵀ and dP_ijᵀ are issued back to back, so the
//    exponentials of P_ijᵀ run while dP_ijᵀ is on the tensor cores. The two warpgroups take turns to issue their
//    products (named barriers 4 and 5): turn A, S_ijᵀ and dP_ijᵀ of Q block i; turn B, dV_j and dK_j of block i
//    and dQ of the block before, whose dS both warpgroups have written by then, issued back to back and waited for
//    once the turn is passed (one dQ product: SPLIT_DQ or d = 64; unsplit at d = 128, two 64-column pieces through
//    one register tile, dV_j and dK_j are waited for inside the turn first); order A0 A1 B0 B1 A0 …, so that one
//    warpgroup's exponentials and dS_ij run while the other's products are on the tensor cores (FlashAttention-3's
//    ping-pong, here across a Q block's two halves of the work). Br = 64 queries per step, or 128 (d = 64):
//    wgmma's n is then 128 for S_ijᵀ and dP_ijᵀ, which halves the SRAM bytes read per FLOP of their B operands
//    and the barriers per FLOP.
//  - dQ (SPLIT_DQ): both warpgroups' dS_ij tiles form dS_ij over all Bc keys, and warpgroup c computes half of
//    dQ_i from it: columns 64c … (d = 128), 32c … (d = 64, Br = 64: B starts 64 bytes into K_j's swizzled rows)
//    or, with Br = 128, rows 64c … and all 64 columns. Without SPLIT_DQ each warpgroup adds its own 64 keys'
//    share of all of dQ_i (twice the additions). The product, times τ, goes to this warpgroup's SRAM tile (float32,
//    128-byte swizzle, no bank conflict) and one thread adds it into the float32 accumulator in HBM with one TMA
//    reduce-add per 32 columns (the additions happen in L2; rows past N are skipped by the tensor map);
//    DQ_TMA = 0 instead adds it with red.global.add.v2.f32 per element, as rung 5. Not a second pass over K/V
//    blocks per Q block: that recomputes S_ij and dP_ij, 7 products per tile pair instead of 5.
//  - DETERMINISTIC: the additions into dQ_i land in any order, so dQ differs from run to run by float32
//    rounding; with DETERMINISTIC a counter per Q block in HBM orders them by K/V block j (each warpgroup waits
//    for its turn, adds, waits for its additions to land, passes the turn on), as FlashAttention-3 does.
//  - D = rowsum(dO ∘ O), the zeroed accumulator and the L_i/D_i blocks come from backward_passes.cu's pre-pass,
//    as for rung 5. FUSED_DQ (plain calls with TMA reduce-adds and at least 256 query planes, gpu/backward.py's
//    `fused`): each thread block, its reduce-adds landed, counts itself once in its query plane's counter (zeroed by
//    the pre-pass), and the plane's last rounds the plane's dQ from L2; otherwise the same file's third launch
//    rounds dQ at the end.
// Only d = 64 and 128 (whole 128-byte pieces), fp16/bf16, sm_90a; other head dims and GPUs use rung 5.
//
// Measured (NVIDIA H100 80GB HBM3, gpu/NOTES.md runs 21–24 and 32; backward alone, fp16, 16k tokens, hidden
// 2048, TFLOP/s at 2.5 × the forward's FLOPs, rung 5 timed beside it in interleaved rounds, `python -m
// gpu.lab.backward_rungs`):
//  - run 32, the default (split dQ, TMA reduce-adds, L_i/D_i by bulk copy; Br = 128 at d = 64): d = 64 188–368
//    against rung 5's 147–222 (+28 … +66%), d = 128 231–464 against 161–252 (+43 … +84%); N ≥ 4096: 303–368
//    (31–37% of the 989 dense TFLOP/s) and 362–464 (37–47%). Run 24's version: 154–193 and 196–349.
//  - what each step gave (run 32, same rounds): the bulk copy of L_i/D_i and the double-buffered dS_ij, with
//    the atomics kept, took d = 128 from run 24's 196–349 to 213–387 and d = 64 (now split too) from 154–193 to
//    167–306; the TMA reduce-adds then +8 … +26% at d = 128 (L2 was 56% busy with the atomics), +1 … +3% at
//    d = 64; split against unsplit at d = 64 (Br = 64): within ±1%; Br = 128 at d = 64: +9 … +18% over 64.
//  - failures: the product of dQ_i left in flight into the next Q block (its reduction behind that block's
//    S_ijᵀ and dP_ijᵀ), d = 64: −7 … −10% with the TMA reduce-adds (run 32) as with atomics (run 24): not
//    understood, removed. Three stages against two: within ±5% (run 22). Br = 128 at d = 128: not tried (the
//    accumulators of S_ijᵀ, dP_ijᵀ, dK_j and dV_j alone would take 256 registers).
//  - deterministic: 76–194 at d = 64 (Br = 64), 112–291 at d = 128, 0.36–0.71× the default (causal pays most:
//    the K/V blocks of one Q block queue behind each other's turns).
//  - what bounds it (ncu, run 32, Br = 64, N = 4096, third launch, SM at 1.81–1.83 GHz): d = 128 3.00 ms (run
//    24: 4.01), tensor pipe active 48% (36%), L2 52% busy, stalls per issued instruction: wait 1.29, long
//    scoreboard 1.10, short scoreboard 0.68; d = 64 4.46 ms (7.30), tensor pipe 32% (19%), wait 1.40, long
//    scoreboard 1.17, barrier 0.40 (2.57). Issue slots 34–36% busy: latency between each warpgroup's dependent
//    steps (wgmma → exp → wgmma → SRAM → barrier → wgmma), with two warpgroups to hide it, not a pipe's rate.
//  - run 35 (seventh session, helper bwd; backward alone, fp16, N = 4K and 16K, d 64/128, causal and not, each
//    step against the one before in the same rounds): dS_ij stored by one stmatrix.trans per 16 queries instead
//    of Br / 2 16-bit stores per lane: +3 … +8% (16-bit stores 0.93–0.97× of it; dQ, dK, dV bit for bit the same).
//    Three stages at d = 128 (fit in 227 KiB only there): 0.98–1.01×, not kept. Unsplit dQ at Br = 128 (d = 64;
//    each warpgroup its 64 keys' share of all 128 rows, two 64-row products), which frees the warpgroups of each
//    other: 0.85–0.88×; the same with turns taken (dQ in the same block's B turn): 0.92–0.94× of split (d = 128,
//    Br = 64: 0.88–0.93×), +4 … +10% over unsplit without turns. The turns with split dQ one block late (the
//    kernel now): 1.00–1.03× (geometric mean 1.012 at d = 64, 1.022 at d = 128), unsplit with them 0.86–0.98×:
//    d = 64 317–392 TFLOP/s (32–40% of 989), d = 128 375–455 (38–46%). The same cell moved by up to 12% between
//    calls (d = 64, causal, N = 4K: 277 and 314 for the same kernel). Forward + backward through autograd:
//    0.73–0.87× cuDNN, median 0.79 (run 32: 0.75).
//  - run 37-bwd3 (eighth session, helper bwd3; backward alone, fp16, 16k tokens, N = 1K … 16K, d 64/128, causal and
//    not, against cuDNN's backward in the same interleaved rounds, `python -m gpu.lab.backward_builds`): dQ_i's
//    product issued in the B turn right behind dV_j and dK_j, the turn passed, then one wait for the three (before:
//    dV_j, dK_j waited for inside the turn, then dQ issued and the turn passed), so that the other warpgroup queues
//    its products while these run: ×1.016–1.118 per shape over the same passes (geometric mean 1.055), with the
//    faster passes (backward_passes.cu) ×1.055–1.178 (1.083); ×cuDNN median 0.839 → 0.893 (0.864–0.940). Its one
//    cost: at it = 0 the dQ product runs on the unwritten dS buffer and is thrown away (one in items + 1 of the
//    block's dQ products); guarding the issue with `if (it > 0)` made ptxas spill 332–372 bytes. ncu (N = 4096,
//    16k tokens, third launch): d = 64 3.39 ms, tensor pipe 43% active; d = 128 2.71 ms (run 32: 3.00), 55% (48%);
//    issue slots 36%, stalls per issued instruction: wait 1.2–1.3, long scoreboard 1.1–1.2, barrier 0.7–0.9.
//    Three stages at d = 128 against two, on this kernel: ×0.963–1.023 (0.985), not kept. Forward + backward
//    through autograd: ×cuDNN median 0.85 (0.67–0.92; run 37: 0.79).
//    Correct: 342 GPU tests (rung 7, backward, autograd, variants), memcheck and synccheck 0 errors (run 37-bwd3).
//  - run 38-bwd4 (ninth session; failure, not kept, the kernel above is unchanged): dQ rounded by the kernel instead
//    of backward_passes.cu's third launch — a counter per (query plane, Q block, half of dQ_i), zeroed by the
//    pre-pass; thread 0 of each warpgroup, once its reduce-add had landed (cp.async.bulk.wait_group), counted it
//    (fence.proxy.async.global, atom.acq_rel.gpu), and the warpgroup whose count completed the half rounded it from
//    L2. Correct (checks against float64, deterministic bit for bit, memcheck 0 errors) but ×0.74–0.95 of the
//    kernel with the pass (geometric means 0.82–0.83; counting item it − 3 instead of it − 2, during the B turn's
//    wgmma wait: 0.77–0.96, 0.86–0.87), with a relaxed count and no proxy fence (not ordered by PTX's memory
//    model) still 0.86–1.02 (0.93): the count per Q block costs each step more than the 69 µs pass saves.
//    Counted once per thread block instead, at its end, in its query plane's counter, the plane's last block
//    rounding the whole plane (commit 2f44c8b, reverted): ×0.958–1.049 (geometric mean 1.014; N = 1K +1.6 … +4.9%,
//    causal N = 16K −0.7 / −4.2%: there the plane's last block is j = 0, the longest walk, and its rounding is
//    the grid's exposed tail); correct on lab checks and memcheck, not run through the GPU test suite (the device
//    share was spent), so not landed (gpu/NOTES.md run 38-bwd4).
//  - run 38-edge5 (ninth session, helper edge5; CPU only): EDGE_SPLIT (a lab switch then, default 0: the PTX of
//    every default, deterministic, GQA/window and tuned build is byte for byte what it was) writes line 11 as two
//    straight bodies, `if (edge)` masked, else unmasked, from one source (EXPONENTIALS), instead of the test of
//    `edge` per element, where ptxas kept one taken branch per element of P_ijᵀ on inner tiles too (run 38-model7:
//    about half of the exponentials' stall samples at d = 64). ptxas, sm_90a, 30 builds: no spill. SASS per consumer
//    warp per step (gpu.lab.rung7_instructions' pieces): inner tile's exponentials 222 instructions + 64 taken
//    branches → 153 + 1 at d = 64, 120 + 32 → 81 + 1 at d = 128; edge tile 734 → 862 and 376 → 432 (the mask
//    predicated, FSELs, no branch); the inner step 995 → 931 and 819 → 787. Next session's measurement:
//    `python -m gpu.lab.backward_builds --ns 1024,4096,16384 --build base: --build split:EDGE_SPLIT=1`.
//  - run 39 (tenth session, lead, H100): that measurement, NVRTC's build checked against float64 first: the split
//    ×1.127 geometric mean of the one-body build (1.059–1.285; d = 64 ×1.09–1.28, d = 128 ×1.06–1.15), backward
//    alone 0.94–1.08× cuDNN (median 0.99; one-body 0.81–0.93, median 0.90). Now the only form: the switch is gone.
//  - run 39-bwd5 (tenth session, helper bwd5, H100; `python -m gpu.lab.backward_builds --ns 1024,4096,16384 --build
//    base:dq_pass=1 --build plane:`): run 38-bwd4's per-plane rounding (commit 2f44c8b) on this kernel, 8 chunks in
//    flight per thread: ×1.006 geometric mean of the kernel with the pass (0.966–1.050); ×1.015–1.050 at N = 1K (256,
//    512 planes), ×0.997–1.006 at N = 4K, ×0.966–1.013 at N = 16K (16, 32 planes; causal −3.4%, −3.1%: the plane's
//    last block, j = 0, rounds its 4–8 MiB of float32 at one SM's rate, the grid's tail). Landed where it pays: from
//    256 planes on (gpu/backward.py FUSED_PLANES); below, FUSED_DQ = 0 and the third launch, the kernel as before.
//    Backward alone ×cuDNN median 0.986 → 0.991 (0.909–1.102) over those 12 shapes.
//  - run 41 (twelfth session, lead, H100; `bash gpu/lab/devrun_bwd.sh discard` of run 39-bwd5, then removed):
//    the rounded accumulator's lines dropped from L2 unwritten (discard.global.L2: the pre-pass zeroes the
//    accumulator before it is read again, so no write-back to HBM is needed), built as the switch DISCARD_ACC and
//    timed beside the build without it, every plane rounded by the kernel, N = 1K, d 64 / 128, causal and not:
//    ×1.009 geometric mean (1.000–1.017), never slower, checked against float64 first. Now the only form of the
//    fused rounding (the switch is gone).
//  - correct at every step: 84 GPU tests of this file and autograd's (FlashAttention's criterion against
//    float64 for dQ, dK, dV; ragged, causal, N ≠ Nk, rows with no key, N = 1K … 16K, fp16 and bf16, every
//    tiling, deterministic bit for bit), memcheck 0 errors, racecheck 0 hazards at Br = 64 on launches with
//    items ≤ STAGES (run 32; with more items it reports the mbarrier false positive below).
//
// Racecheck (run 35): it reports WAR hazards between the consumers' ld.shared of L_i, D_i and the producer's bulk
// copy into the same stage (plain and GQA builds, d = 64 and 128, whenever items > STAGES), ordered by the stage's
// EMPTY mbarrier (reads → named barrier → one arrive per warpgroup → the producer's wait → the copy). A tool
// limitation, not a race: racecheck does not follow mbarrier ordering. A build whose producer warp wrote L_i, D_i
// with st.shared (then __syncwarp, arrive) drew RAW hazards on the FULL handoff instead, and a 64-thread kernel
// that hands a 32-int buffer back and forth through two mbarriers (values checked: correct) drew 4 racecheck
// errors. Run 34's hazard is this one; memcheck and synccheck (the named barriers of the turns) are clean.
// Run 44 (lead, H100): the hazards still stood (the backward variants' smoke under racecheck: 90,118 reports, all
// here), though gpu/lab/racecheck_probe.py's same order (readers meet at bar.sync, one arrives, the writer waits,
// then a bulk copy: HANDOFF 6) draws none in isolation — not explained. Now every consumer thread arrives on EMPTY
// after its last read of the stage (2 · 128 arrivals a phase): racecheck 0 hazards (plain d = 64 and 128 with items
// > STAGES, GQA, window; and the backward variants' smoke, rung 5's included), synccheck and memcheck 0, 73 tests
// of tests/test_gpu_rung7.py pass, dK, dV bit for bit the old build's; 0.987–1.029× its time (8 shapes, d 64 and
// 128, N 1K–16K, causal and not, GQA; interleaved, public call), i.e. no cost measured.
//
// Variants (run 34: their tests passed, memcheck 0 errors; racecheck: the mbarrier false positive above; not
// timed): GQA and the window (variants.cuh, gpu/variants.py's VARIANTS define; packed batches since run 46, softcap and
// ALiBi since run 47, below). GQA:
// the thread block of K/V block j of K/V head hkv walks the Q blocks of its g query heads one after the other
// through the same stages, so dK_j, dV_j sum the g heads in registers; grid (Tc, B·Hkv). The window: only the Q
// blocks some row of which sees a key of K_j (seen_q_blocks), the mask where a tile is not fully seen.
// DETERMINISTIC is refused with a window (gpu/backward.py): its turns assume every K/V block before j visits Q
// block i, which a window's left side breaks. (Adding the variants, run 31, left the plain build's PTX as it was.)
// Run 46 (lead, H100): packed batches (VARLEN). Grid (Tc of the longest, Hkv, B), as rung 5's: thread block (j, hkv, b)
// takes sequence b's lengths from cu_q, cu_k (a block past its Nk returns before any barrier) and works as a plain
// block would on them; its tensor maps are the packed (H, total, d) views (gpu/tma.py packed_map, dQ's accumulator
// too), rows offset by cu_q[b] / cu_k[b]. The pre-pass lays L_i·log2 e and D_i out per sequence, (B, Hq, Tr of the
// longest, 2, Br), each sequence's last block zero past its end, so one bulk copy still brings a Q block's. A box
// past a sequence's end reads the next sequence's rows (masked: P = 0 there, so dS = 0 with D finite), and dQ's
// reduce-add there adds exact zeros into the next sequence's rows; dK_j, dV_j are stored from registers up to Nk.
// DETERMINISTIC holds (its order is by j within the sequence, as plain). Every other build's PTX is byte-identical
// (plain, GQA/window, atomics, deterministic; d 64 and 128). Checked: tests/test_gpu_backward_variants.py (rung 7
// packed: ragged, one-row sequences, N ≠ Nk both ways, GQA with a window, several blocks a sequence, causal and not,
// fp16 / bf16, deterministic bit for bit) and rung 5 beside it; 388 GPU tests of the backward, rung 7 and autograd;
// memcheck 0 errors, racecheck 0 hazards. Measured (`python -m gpu.lab.bench_variants --backward --only varlen`, 16k
// tokens and more in four sequences of N down to N/2, causal, forward + backward through autograd, ×cuDNN on the
// padded batch): d 64 1.35, 1.57, 1.63 and d 128 1.24, 1.36, 1.49 at N = 4096, 8192, 16384, where rung 5 had given
// 0.88–0.96 and 0.76–0.82. First build wrong everywhere (dv too): the pre-pass read L as (total_q, Hq); it is the
// forward's (Hq, total_q).
//
// Run 47 (lead, H100): softcap and ALiBi (SCORED), so that every variant runs here. Line 11 scores S_ij as the forward
// does (variants.cuh's `scored`: τ·log2 e, c·tanh(x/c), minus slope·|p + Nk − N − c|); line 14's softcap chain rule
// needs 1 − tanh²(x/c) per element, which rung 5 keeps from line 11 in registers: here the accumulators leave no room
// (d = 128: 32 more a thread past 240), so it is taken back from P_ij, tanh = (log2 P_ij + L_i log2 e + bias) / (c
// log2 e), one lg2.approx an element; where P_ij = 0 it is clamped to |tanh| = 1 (dS_ij is 0 there anyway). Every
// other build's PTX is byte-identical (plain, GQA/window, packed, atomics, deterministic; d 64 and 128). nvcc, sm_90a:
// no spill at d = 128; at d = 64 softcap 0 bytes (packed 8), ALiBi 4, both 164 (packed 116). NVRTC, which builds
// what runs (gpu.lab.nvrtc_spills, its front end gives other PTX): d = 128 none; d = 64 plain 8 bytes (nvcc: 0; one
// register stored and loaded a step, no time measured for it), GQA/window and softcap 12, packed 8, ALiBi 0.
// Measured (H100, causal, fp16, N 4096, 16k tokens): backward alone ×1.53–1.97 rung 5's speed for ALiBi and softcap;
// the training step through autograd ×1.02–1.22 (ALiBi) and ×1.74–2.03 (softcap 30) FlexAttention compiled.
//
// Injected #defines: HEAD_DIM (64 or 128), BR (64, or 128 at d = 64 with SPLIT_DQ), STAGES (Q_i/dO_i stages in
// SRAM), SPLIT_DQ (see "dQ"), DQ_TMA (1: TMA reduce-adds, 0: atomics), DETERMINISTIC, STORAGE (1 fp16, 2 bf16),
// FUSED_DQ (see "D = rowsum"; gpu/backward.py's `fused`), ROUND_BATCH (its chunks in flight per thread).

#define BC 128                            // Bc: keys per thread block, 64 per consumer warpgroup
#define CONSUMERS 2
#define NTHREADS (128 * (CONSUMERS + 1))  // warpgroup 0 loads, warpgroups 1 and 2 compute
#define PIECES (HEAD_DIM / 64)            // 64-column pieces of a row: one 128-byte swizzled TMA box each
#define TILE_Q (BR * HEAD_DIM * 2)        // bytes of Q_i (and of dO_i) in one stage
#define TILE_KV (BC * HEAD_DIM * 2)       // bytes of K_j (and of V_j)
#define TILE_DS (BR * 64 * 2)             // bytes of one warpgroup's dS_ij: Br queries × its 64 keys
#define TILE_LD (2 * BR * 4)              // bytes of L_i·log2 e and D_i in one stage (the pre-pass's LD blocks)
#define NACC (HEAD_DIM / 2)               // dK_j (and dV_j) accumulators per thread: 64 keys × d over 128 threads
#define SPLIT_ROWS (BR == 128)            // SPLIT_DQ by rows: warpgroup c computes dQ_i's queries 64c … 64c + 63
#define DQ_COLS (SPLIT_ROWS ? HEAD_DIM : SPLIT_DQ ? HEAD_DIM / CONSUMERS : 64)  // columns of one dQ product
#define DQ_PIECES (SPLIT_DQ ? 1 : PIECES)  // dQ products per Q block and warpgroup
#define DQ_KEYS (SPLIT_DQ ? BC : 64)       // keys each of them sums over
#define TILE_DQ (64 * DQ_COLS * 4)         // bytes of one warpgroup's float32 dQ product: boxes of (64, 32)
#ifndef FUSED_DQ
#define FUSED_DQ 0
#endif
#if FUSED_DQ && (VARIANTS || !DQ_TMA)
#error "FUSED_DQ: the plain build with TMA reduce-adds only (the launcher rounds dQ in a pass otherwise)"
#endif
#ifndef ROUND_BATCH
#define ROUND_BATCH 8  // FUSED_DQ: 8-column chunks each consumer thread loads before it stores
#endif
#define REG_PRODUCER 24
#define REG_CONSUMER 240  // 128 · 24 + 256 · 240 ≤ 65536

#include "common.cuh"  // NEG_INF, LOG2E, pack2, exp2_approx, log2_approx, accumulators_to_a, atomic_add_f32x2
#include "hopper.cuh"  // TMA, bulk copies and reductions, mbarrier, wgmma, setmaxnreg
#include "variants.cuh"  // GQA, the window, packed batches, softcap, ALiBi: only what the launcher's #defines ask for
#ifndef VARIANT_PARAMS
#define VARIANT_PARAMS
#endif

#define KV_FULL (bar)                             // mbarrier: K_j and V_j have arrived
#define FULL(s) (bar + 8 * (1 + (s)))             // mbarrier: Q_i, dO_i, L_i and D_i are in stage s
#define EMPTY(s) (bar + 8 * (1 + STAGES + (s)))   // mbarrier: both consumer warpgroups are done with stage s

// acc (64 × Br) = A Bᵀ over HEAD_DIM, both K-major in SRAM, rows a_rows and b_rows of pieces a_piece and b_piece
// bytes apart: S_ijᵀ = K_j Q_iᵀ (line 10) and dP_ijᵀ = V_j dO_iᵀ (line 13) for this warpgroup's 64 keys
__device__ __forceinline__ void issue_transposed(float (&acc)[BR / 2], u32 a_rows, u32 a_piece, u32 b_rows, u32 b_piece) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
        const u32 at = (kk % 4) * 32;  // the k-step's 32 bytes within a 128-byte row
        wgmma_ss(acc, sw128_desc(a_rows + (kk / 4) * a_piece + at, 16), sw128_desc(b_rows + (kk / 4) * b_piece + at, 16), kk > 0);
    }
    wgmma_commit();
}

// lines 12 and 16: dV_j += P_ijᵀ dO_i, dK_j += dS_ijᵀ Q_i; A fragments from registers, dO_i and Q_i N-major (a
// k-step is 16 queries, 2048 bytes; 64-column pieces Br · 128 bytes apart); one commit group
__device__ __forceinline__ void issue_key_grads(float (&dv)[NACC], const u32 (&pf)[BR / 16][4], float (&dk)[NACC],
                                                const u32 (&dsf)[BR / 16][4], u32 do_tile, u32 q_tile) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) wgmma_rs(dv, pf[kk], sw128_desc(do_tile + kk * 2048, BR * 128));
#pragma unroll
    for (int kk = 0; kk < BR / 16; ++kk) wgmma_rs(dk, dsf[kk], sw128_desc(q_tile + kk * 2048, BR * 128));
    wgmma_commit();
}

// line 15 for DQ_COLS columns: dq (64 queries × DQ_COLS) = dS_ij (SRAM, K-major, 64 keys per tile, the 64 rows from
// ds_rows on) · K_j (N-major, the columns from k_cols on: a 64-column piece, or half of one, 64 bytes into its rows),
// over DQ_KEYS keys
__device__ __forceinline__ void issue_dq(float (&dq)[DQ_COLS / 2], u32 ds_rows, u32 k_cols) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < DQ_KEYS / 16; ++kk)
        wgmma_ss_nmajor(dq, sw128_desc(ds_rows + (kk / 4) * TILE_DS + (kk % 4) * 32, 16), sw128_desc(k_cols + kk * 2048, BC * 128), kk > 0);
    wgmma_commit();
}

// τ dq → this warpgroup's dQ tile in SRAM, float32, boxes of (Br, 32): element (q, col) of box col / 32 at byte
// q·128 + (((col mod 32)/4 ⊕ q mod 8)·16) + (col mod 4)·4, the 128-byte swizzle TMA reads (8-byte stores, no bank
// conflict: the 8 rows g of a warp land in 8 different 16-byte chunks)
__device__ __forceinline__ void store_dq(u32 tile, const float (&dq)[DQ_COLS / 2], float scale, int warp, int g, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int q = warp * 16 + g + 8 * h;  // q mod 8 = g
#pragma unroll
        for (int n = 0; n < DQ_COLS / 8; ++n) {  // columns 8n + 2t, + 1
            const u32 at = tile + (n / 4) * 64 * 128 + q * 128 + (((2 * (n % 4) + t / 2) ^ g) << 4) + (t % 2) * 8;
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(scale * dq[4 * n + 2 * h]),
                         "f"(scale * dq[4 * n + 2 * h + 1]) : "memory");
        }
    }
}

// dQ_i += τ dq for this lane's rows (queries r0 + 16·warp + g, + 8; `stride` floats apart), columns col0 …: float32
// atomics (DQ_TMA = 0)
__device__ __forceinline__ void add_dq(float* dQ_rows, size_t stride, const float (&dq)[DQ_COLS / 2], int r0, int col0,
                                       int N, float scale, int warp, int g, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int q = r0 + warp * 16 + g + 8 * h;
        if (q >= N) continue;
#pragma unroll
        for (int n = 0; n < DQ_COLS / 8; ++n)
            atomic_add_f32x2(dQ_rows + (size_t)q * stride + col0 + n * 8 + 2 * t, scale * dq[4 * n + 2 * h],
                             scale * dq[4 * n + 2 * h + 1]);
    }
}

// τ dq → this warpgroup's SRAM tile → dQ_i's rows r0 … in HBM: one TMA reduce-add per 32 columns, issued by one
// thread once every thread's stores are in (DETERMINISTIC: from the piece `first` on in its turn, waiting after the
// piece `last` for the additions to land before passing the turn on)
__device__ __forceinline__ void reduce_dq(const TensorMap* dQ_map, u32 tile, const float (&dq)[DQ_COLS / 2], int col0,
                                          int r0, int bh, float scale, int c, int tid, int* count_i, int turn,
                                          bool first, bool last);

// deterministic dQ: Q block i's counter in HBM counts the warpgroups whose dQ_i has landed; a warpgroup adds its own
// once the count reaches `turn` (its K/V block's place, in order of j), then counts itself
__device__ __forceinline__ void wait_turn(const int* count, int turn) {
    int seen;
    do {
        asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(seen) : "l"(count) : "memory");
    } while (seen < turn);
}
__device__ __forceinline__ void pass_turn(int* count) {
    asm volatile("fence.proxy.async.global;\nred.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(count) : "memory");
}

__device__ __forceinline__ void reduce_dq(const TensorMap* dQ_map, u32 tile, const float (&dq)[DQ_COLS / 2], int col0,
                                          int r0, int bh, float scale, int c, int tid, int* count_i, int turn,
                                          bool first, bool last) {
    store_dq(tile, dq, scale, tid / 32, (tid % 32) / 4, tid % 4);
    fence_proxy_async();
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");  // warpgroup_sync(c)
    if (tid == 0) {
        if (DETERMINISTIC && first) wait_turn(count_i, turn);
#pragma unroll
        for (int b = 0; b < DQ_COLS / 32; ++b) tma_reduce_add_3d(dQ_map, tile + b * 64 * 128, col0 + 32 * b, r0, bh);
        bulk_commit();
        if (DETERMINISTIC && last) {
            bulk_wait<0>();  // the additions have landed
            pass_turn(count_i);
        }
    }
}

// four 8×8 b16 matrices from fragments into SRAM, each transposed on the way; lane L gives the address of row L % 8
// of matrix L / 8 (16 contiguous bytes)
__device__ __forceinline__ void stmatrix_x4_trans(u32 addr, const u32 (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}

// FUSED_DQ: the thread blocks that add into some Q block of a query plane: all Tc, or (causal) those whose walk
// starts before Tr (K/V block j visits Q block i iff j·Bc < (i + 1)·Br + shift)
__device__ __forceinline__ int visitors(int i, int Tc, int shift, int causal) {
    const int m = (i + 1) * BR + shift;
    return !causal ? Tc : m > 0 ? min(Tc, (m + BC - 1) / BC) : 0;
}
// the two consumer warpgroups' barrier (named barrier 3), telling each thread whether any gave true
__device__ __forceinline__ bool consumers_any(bool x) {
    u32 r;
    asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, 3, 256, p;\nselp.u32 %0, 1, 0, q;\n}\n"
                 : "=r"(r) : "r"((u32)x) : "memory");
    return r;
}

// a warpgroup's own barrier (named barrier 1 + c, its 128 threads)
__device__ __forceinline__ void warpgroup_sync(int c) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory"); }
// the warpgroups' turns to issue products: warpgroup c waits on named barrier 4 + c (its 128 threads and the other
// warpgroup's arrival), then passes the turn by arriving on the other's
__device__ __forceinline__ void turn_wait(int c) { asm volatile("bar.sync %0, 256;\n" ::"r"(4 + c) : "memory"); }
__device__ __forceinline__ void turn_pass(int c) { asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - c) : "memory"); }

// Q_map, dO_map: tensor maps of Q, dO (batch·heads, N, HEAD_DIM), boxes of (1, Br, 64); K_map, V_map: of K, V
// (batch·heads, Nk, HEAD_DIM), boxes of (1, Bc, 64); dQ_map: of dQacc, float32, boxes of (1, Br, 32); LD: the
// pre-pass's (batch·heads, Tr, 2, Br) float32 blocks of L_i·log2 e and D_i; dQacc: (batch·heads, N, HEAD_DIM) float32,
// zeroed; count: (batch·heads, Tr) int32, zeroed (DETERMINISTIC only); arrivals: (batch·heads) int32, zeroed by the
// pre-pass, and dQ like Q (FUSED_DQ only); dK, dV like K. Grid: (Tc, batch·heads), NTHREADS threads,
// geometry.backward_wg_smem bytes of dynamic shared memory. VARIANTS: K, V, dK, dV have batch·heads / group planes,
// grid (Tc, batch·heads / group). VARLEN: Q, dO, dQacc (total_q, Hq, ·), K, V, dK, dV (total_k, Hkv, HEAD_DIM), the
// maps their (heads, total, d) views; LD (B, Hq, Tr of the longest, 2, Br), count (B, Hq, Tr); grid (Tc, Hkv, B).
extern "C" __global__ void __launch_bounds__(NTHREADS, 1)
flash2_wgmma_bwd(const __grid_constant__ TensorMap Q_map, const __grid_constant__ TensorMap K_map,
                 const __grid_constant__ TensorMap V_map, const __grid_constant__ TensorMap dO_map,
                 const __grid_constant__ TensorMap dQ_map, const float* __restrict__ LD, float* __restrict__ dQacc,
                 int* __restrict__ count, int* __restrict__ arrivals, elem_t* __restrict__ dQ, elem_t* __restrict__ dK,
                 elem_t* __restrict__ dV, int N, int Nk, float scale,
                 int causal VARIANT_PARAMS)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 sK = (smem_u32(smem) + 1023) & ~1023u;  // SRAM: K_j, PIECES × (Bc, 64), swizzled
    const u32 sV = sK + TILE_KV;                       // SRAM: V_j, likewise
    const u32 sQ = sV + TILE_KV;                       // SRAM: Q_i, STAGES × PIECES × (Br, 64)
    const u32 sdO = sQ + STAGES * TILE_Q;              // SRAM: dO_i, likewise
    const u32 sdS = sdO + STAGES * TILE_Q;             // SRAM: dS_ij, 2 buffers × CONSUMERS × (Br, 64), swizzled
    const u32 sdQ = sdS + 2 * CONSUMERS * TILE_DS;     // SRAM: dQ_i's products, CONSUMERS × (64, DQ_COLS) float32
    const u32 sLD = sdQ + CONSUMERS * TILE_DQ;         // SRAM: L_i·log2 e then D_i, STAGES × 2 × Br floats
    const u32 bar = sLD + STAGES * TILE_LD;            // SRAM: the mbarriers, 8 bytes each
    const float* sLD_ptr = reinterpret_cast<const float*>(smem + (sLD - smem_u32(smem)));

    const int j = blockIdx.x, c0 = j * BC;
#if VARLEN
    const int Tr = (N + BR - 1) / BR;  // Q blocks of a query plane of LD and count: the longest sequence's
    // sequence b = blockIdx.z, K/V head hkv = blockIdx.y: its own lengths from here on, and where its rows sit in
    // the packed maps, (row, plane) = (k0 + key, hkv) for K, V and (q0 + query, h) for Q, dO, dQ
    const int b = blockIdx.z, k0 = cu_k[b], q0 = cu_q[b], kv_heads = heads / group;
    N = cu_q[b + 1] - q0;
    Nk = cu_k[b + 1] - k0;
    if (c0 >= Nk) return;  // this sequence has fewer keys than the longest (before any barrier)
    const int bh = b * kv_heads + blockIdx.y;  // b·Hkv + hkv: its query heads' planes of LD are bh·g … (b·Hq + h)
    const int kv_row = k0, kv_plane = blockIdx.y, q_row = q0, q_base = b * heads;  // LD's plane qh: TMA's qh − q_base
    const int shift = Nk - N;  // causal: query r sees key c iff c ≤ r + shift
#else
    const int bh = blockIdx.y;  // the K/V plane; VARIANTS: b·Hkv + hkv, whose query planes are bh·g … bh·g + g − 1
    const int kv_row = 0, kv_plane = bh, q_row = 0, q_base = 0;
    const int shift = Nk - N;  // causal: query r sees key c iff c ≤ r + shift
    const int Tr = (N + BR - 1) / BR;
#endif
    // line 8's range: all Tr Q blocks, or (causal) from the one holding row c0 − shift, the first to see key c0, or
    // (VARIANTS) the window's, causal folded in; for each of the G query heads in turn: items it = u·blocks + i
#if VARIANTS
    const int G = group;
    int i_first, i_end;
    seen_q_blocks(i_first, i_end, c0, N, Nk, shift, left, right);
    const int blocks = max(0, i_end - i_first);
#else
    constexpr int G = 1;
    const int i_first = causal ? min(Tr, max(0, c0 - shift) / BR) : 0;
    const int blocks = Tr - i_first;
#endif
    const int items = G * blocks;

    if (threadIdx.x == 0) {
        mbar_init(KV_FULL, 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(FULL(s), 1);
            mbar_init(EMPTY(s), CONSUMERS * 128);  // every consumer thread arrives (run 44: racecheck follows it)
        }
        mbar_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: the warpgroups go their own ways from here

    if (threadIdx.x < 128) {  // the producer warpgroup
        setmaxnreg_dec<REG_PRODUCER>();
        if (items == 0) return;
        if (threadIdx.x == 0) {  // line 6: K_j, V_j once; line 9: Q_i, dO_i, L_i, D_i per Q block, through the stages
            mbar_expect_tx(KV_FULL, 2 * TILE_KV);
#pragma unroll
            for (int p = 0; p < PIECES; ++p) {
                tma_load_3d(sK + p * BC * 128, &K_map, KV_FULL, p * 64, kv_row + c0, kv_plane);
                tma_load_3d(sV + p * BC * 128, &V_map, KV_FULL, p * 64, kv_row + c0, kv_plane);
            }
            for (int it = 0; it < items; ++it) {
                const int s = it % STAGES, i = i_first + ITEM_BLOCK(it, blocks), qh = bh * G + ITEM_HEAD(it, blocks);
                if (it >= STAGES) mbar_wait(EMPTY(s), ((it / STAGES) & 1) ^ 1);
                mbar_expect_tx(FULL(s), 2 * TILE_Q + TILE_LD);
#pragma unroll
                for (int p = 0; p < PIECES; ++p) {
                    tma_load_3d(sQ + s * TILE_Q + p * BR * 128, &Q_map, FULL(s), p * 64, q_row + i * BR, qh - q_base);
                    tma_load_3d(sdO + s * TILE_Q + p * BR * 128, &dO_map, FULL(s), p * 64, q_row + i * BR, qh - q_base);
                }
                bulk_load(sLD + s * TILE_LD, LD + ((size_t)qh * Tr + i) * 2 * BR, TILE_LD, FULL(s));
            }
        }
        return;
    }

    // a consumer warpgroup: keys c0 + 64c … of K_j; this lane holds keys g and g + 8 of its warp's 16 and, in
    // each 8-column n-tile, queries 2t and 2t + 1
    setmaxnreg_inc<REG_CONSUMER>();
    const int c = threadIdx.x / 128 - 1;
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int key = c0 + c * 64 + warp * 16 + g;  // this lane's first key
    const u32 k_rows = sK + c * 64 * 128, v_rows = sV + c * 64 * 128;  // this warpgroup's rows of K_j, V_j
    const float scale_log2 = scale * LOG2E;
#if SCORED
    const float inv_cap = SOFTCAP ? 1.f / cap : 0.f;  // cap: c·log2 e
#endif

    // line 7: dK_j = 0, dV_j = 0 in registers
    float dk[NACC], dv[NACC];
#pragma unroll
    for (int e = 0; e < NACC; ++e) dk[e] = dv[e] = 0.f;

    const int dq_col0 = SPLIT_DQ && !SPLIT_ROWS ? c * DQ_COLS : 0;  // the first column of dQ_i it computes …
    const int dq_row0 = SPLIT_ROWS ? 64 * c : 0;                     // … and its first row
#if DQ_TMA
    const int turn = CONSUMERS * j + (SPLIT_DQ ? 0 : c);  // DETERMINISTIC: this warpgroup's turn at each Q block
#endif
    float dq[DQ_COLS / 2];  // registers: line 15's product
#if !DQ_TMA && VARLEN  // DQ_AT(qh): row 0 of query plane qh in the dQ accumulator (atomics), rows dq_stride apart
#define DQ_AT(qh) (((size_t)q_row * heads + (qh) - q_base) * HEAD_DIM)  // (total_q, Hq, d)
    const size_t dq_stride = (size_t)heads * HEAD_DIM;
#elif !DQ_TMA
#define DQ_AT(qh) ((size_t)(qh) * N * HEAD_DIM)  // (batch·heads, N, d)
    const size_t dq_stride = HEAD_DIM;
#endif

    // The warpgroups take turns (turn_wait, turn_pass) to issue their products: turn A, lines 10 and 13 of item it;
    // turn B, lines 12 and 16 of item it and line 15 of item it − 1, whose dS_ij both warpgroups have written by
    // then. Order A0 A1 B0 B1 A0 …: one warpgroup's exponentials and dS_ij run while the other's products are on the
    // tensor cores. A last B turn (it = items) computes the last item's line 15.
    if (c == 1) turn_pass(c);  // warpgroup 0 issues first
    if (items > 0) mbar_wait(KV_FULL, 0);
    int prev_r0 = 0, prev_qh = 0;  // item it − 1's first row and query plane: its dQ is due
#if DQ_TMA
    int* prev_count = count;  // DETERMINISTIC: its Q block's counter
#endif
    for (int it = 0; it <= items; ++it) {
        const bool live = it < items;
        u32 pf[BR / 16][4], dsf[BR / 16][4];  // P_ijᵀ and dS_ijᵀ in fp16/bf16, wgmma A fragments of 16 queries
        int s = 0, i = 0, r0 = 0, qh = 0;
        u32 q_tile = 0, do_tile = 0;
        if (live) {
            s = it % STAGES;
            i = i_first + ITEM_BLOCK(it, blocks);
            r0 = i * BR;
            qh = bh * G + ITEM_HEAD(it, blocks);  // the query plane: Q_i, dO_i, L_i, D_i, dQ_i's (and its counters)
            q_tile = sQ + s * TILE_Q;
            do_tile = sdO + s * TILE_Q;
            const float* Lb_i = sLD_ptr + s * 2 * BR;  // SRAM: L_i·log2 e (zeros past N), then D_i
            const float* D_i = Lb_i + BR;
            mbar_wait(FULL(s), (it / STAGES) & 1);

            float st[BR / 2], dpt[BR / 2];  // registers: S_ijᵀ (then P_ijᵀ), dP_ijᵀ (then dS_ijᵀ), 64 keys × Br queries
            turn_wait(c);                                                // turn A
            issue_transposed(st, k_rows, BC * 128, q_tile, BR * 128);    // line 10
            issue_transposed(dpt, v_rows, BC * 128, do_tile, BR * 128);  // line 13, in flight during line 11
            turn_pass(c);
            wgmma_wait<1>();
            keep(st);

            // line 11: P_ijᵀ = exp(τ S_ijᵀ − L_i), base 2; 0 for keys past Nk, queries past N and hidden pairs (a
            // query that sees no key has L = −∞: all its pairs are hidden, so its +∞ is replaced, never used);
            // SCORED: S_ij as the forward scores it (variants.cuh's `scored`: softcap, then ALiBi, base 2)
            // edge: some pair of the tile is masked; HIDDEN: the pair of query q_e and key k_e is
#if SCORED
            const float slope = ALIBI ? slopes[qh] : 0.f;  // slope_h · log2 e of query plane qh = b·Hq + h
#endif
#if VARIANTS
            const bool edge = r0 + BR > N || !fully_seen(c0, r0, r0 + BR - 1, Nk, shift, left, right);
#define HIDDEN(q_e, k_e) (q_e >= N || !sees(q_e, k_e, Nk, shift, left, right))
#else
            const bool edge = c0 + BC > Nk || r0 + BR > N || (causal && c0 + BC - 1 > r0 + shift);
#define HIDDEN(q_e, k_e) (k_e >= Nk || q_e >= N || (causal && k_e > q_e + shift))
#endif
            // line 11's element loop, the mask applied where MASKED holds: one source for the bodies below
#if SCORED  // the score of element (n, e), base 2, less L_i log2 e
#define SCORE(n, e) \
    (scored(st[4 * n + e], r0 + qi, key + (e >> 1) * 8, shift, scale_log2, cap, inv_cap, slope) - Lb_i[qi])
#else
#define SCORE(n, e) fmaf(st[4 * n + e], scale_log2, -Lb_i[qi])
#endif
#define EXPONENTIALS(MASKED)                                                                      \
    _Pragma("unroll") for (int n = 0; n < BR / 8; ++n)                                           \
    _Pragma("unroll") for (int e = 0; e < 4; ++e) {                                              \
        const int qi = n * 8 + 2 * t + (e & 1); /* the query's row in Q_i */                     \
        float p = exp2_approx(SCORE(n, e));                                                      \
        if (MASKED) {                                                                            \
            const int k_e = key + (e >> 1) * 8, q_e = r0 + qi;                                   \
            if (HIDDEN(q_e, k_e)) p = 0.f;                                                       \
        }                                                                                        \
        st[4 * n + e] = p;                                                                       \
    }
            // two straight bodies, the test once a tile: an inner tile's has no branch per element (run 39)
            if (edge) {
                EXPONENTIALS(true)
            } else {
                EXPONENTIALS(false)
            }
#undef EXPONENTIALS
#undef SCORE
#undef HIDDEN
            wgmma_wait<0>();
            keep(dpt);

            // line 14: dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i), in place of dP_ijᵀ; SOFTCAP: ∘ (1 − tanh²(x/c)), the chain
            // rule through S = c·tanh(x/c), x = τ q·k. tanh(x/c) is the capped score over c, taken back from P_ij
            // (log2 P_ij + L_i log2 e, plus the ALiBi bias the score lost) rather than kept from line 11 in Br / 2
            // more registers a thread, which the accumulators leave no room for; where P_ij = 0 (hidden, or
            // underflowed) that is −∞, clamped to |tanh| = 1: dS_ij is 0 there either way
#pragma unroll
            for (int n = 0; n < BR / 8; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    dpt[4 * n + e] = st[4 * n + e] * (dpt[4 * n + e] - D_i[n * 8 + 2 * t + (e & 1)]);
#if SOFTCAP
                    const int qi = n * 8 + 2 * t + (e & 1);
                    float capped = log2_approx(st[4 * n + e]) + Lb_i[qi];
#if ALIBI
                    capped += ALIBI_BIAS(slope, r0 + qi, key + (e >> 1) * 8, shift);
#endif
                    const float tc = fminf(1.f, fabsf(capped * inv_cap));
                    dpt[4 * n + e] *= 1.f - tc * tc;
#endif
                }

#pragma unroll
            for (int kk = 0; kk < BR / 16; ++kk) {
                accumulators_to_a(pf[kk], st + 8 * kk, st + 8 * kk + 4);
                accumulators_to_a(dsf[kk], dpt + 8 * kk, dpt + 8 * kk + 4);
            }
        }
#if DQ_TMA
        if (tid == 0) bulk_wait_read<0>();  // the last reduction has read this warpgroup's dQ tile
#endif
        // turn B. The other warpgroup has written its dS_ij of item it − 1 (before passing its last B turn) and
        // finished its line 15 of item it − 2 (before passing its last A turn), the last reader of buffer it mod 2.
        turn_wait(c);
        const u32 ds_tiles = sdS + ((it + 1) % 2) * CONSUMERS * TILE_DS;  // item it − 1's dS_ij, both warpgroups'
        if (live) {
            // dS_ij into SRAM for line 15, buffer it mod 2: element (query q, key κ) of this warpgroup's (Br, 64)
            // tile at byte q·128 + ((κ/8 ⊕ q mod 8)·16) + (κ mod 8)·2, the 128-byte swizzle wgmma reads; one
            // stmatrix.trans per 16 queries: dsf[kk][r] is the 8 × 8 block of keys 16·warp + 8(r mod 2) … and queries
            // 16kk + 8(r / 2) …; transposed on the way, its row e (query 16kk + 8(r / 2) + e: 8 keys, 16 bytes) goes
            // to the address lane 8r + e gives (q mod 8 = e: the 8 rows of a block land in 8 different 16-byte chunks)
            const u32 ds_lane = sdS + (it % 2) * CONSUMERS * TILE_DS + c * TILE_DS +
                                (8 * (lane / 16) + lane % 8) * 128 + (((2 * warp + (lane / 8) % 2) ^ (lane % 8)) << 4);
#pragma unroll
            for (int kk = 0; kk < BR / 16; ++kk) stmatrix_x4_trans(ds_lane + kk * 16 * 128, dsf[kk]);
            fence_proxy_async();
            issue_key_grads(dv, pf, dk, dsf, do_tile, q_tile);  // lines 12 and 16
        }
        // line 15 for item it − 1: dQ_i += τ dS_ij K_j, DQ_COLS columns at a time (SPLIT_DQ: this warpgroup's share of
        // dQ_i over all Bc keys; else every piece over its own 64 keys), into the float32 accumulator in HBM
#if DQ_PIECES == 1
        // one product, issued in the same turn behind lines 12 and 16, one wait for all three after the turn is
        // passed: the other warpgroup queues its products while these run. At it = 0 the product reads buffer 1,
        // which no item has written yet, and is never added (an `if (it > 0)` around the issue made ptxas spill
        // 332–372 bytes)
        issue_dq(dq, (SPLIT_DQ ? ds_tiles : ds_tiles + c * TILE_DS) + dq_row0 * 128,
                 (SPLIT_DQ ? sK : k_rows) + (dq_col0 / 64) * BC * 128 + (dq_col0 % 64) * 2);
        turn_pass(c);
        wgmma_wait<0>();
        keep(dv);
        keep(dk);
        keep(pf);
        keep(dsf);
        keep(dq);
        if (live) mbar_arrive(EMPTY(s));  // stage s is free: this thread's reads of it are done
        if (it > 0) {
#if DQ_TMA  // through SRAM, TMA adding in L2
            reduce_dq(&dQ_map, sdQ + c * TILE_DQ, dq, dq_col0, q_row + prev_r0 + dq_row0, prev_qh - q_base, scale, c,
                      tid, prev_count, turn, true, true);
#else
            add_dq(dQacc + DQ_AT(prev_qh), dq_stride, dq, prev_r0 + dq_row0, dq_col0, N, scale, warp, g, t);
#endif
        }
#else  // two 64-column pieces through one register tile: lines 12 and 16 waited for in the turn, first
        if (live) {
            wgmma_wait<0>();  // P_ijᵀ's and dS_ijᵀ's registers are free before dq's are taken
            keep(dv);
            keep(dk);
            keep(pf);
            keep(dsf);
            mbar_arrive(EMPTY(s));  // stage s is free: this thread's reads of it are done
        }
        if (it == 0) turn_pass(c);
        if (it > 0) {
#pragma unroll
            for (int p = 0; p < DQ_PIECES; ++p) {
                const int col0 = dq_col0 + p * 64;
                issue_dq(dq, ds_tiles + c * TILE_DS + dq_row0 * 128, k_rows + (col0 / 64) * BC * 128);
                if (p == 0) turn_pass(c);
                wgmma_wait<0>();
                keep(dq);
#if DQ_TMA
                if (p > 0) {
                    if (tid == 0) bulk_wait_read<0>();  // the previous piece's reduction has read the tile
                    warpgroup_sync(c);
                }
                reduce_dq(&dQ_map, sdQ + c * TILE_DQ, dq, col0, q_row + prev_r0 + dq_row0, prev_qh - q_base, scale, c,
                          tid, prev_count, turn, p == 0, p == DQ_PIECES - 1);
#else
                add_dq(dQacc + DQ_AT(prev_qh), dq_stride, dq, prev_r0 + dq_row0, col0, N, scale, warp, g, t);
#endif
            }
        }
#endif
        prev_r0 = r0;
        prev_qh = qh;
#if DQ_TMA
        prev_count = count + (size_t)qh * Tr + i;
#endif
    }
    if (c == 0) turn_wait(c);  // warpgroup 1's last pass: every arrival has its wait
#if DQ_TMA
    if (tid == 0) bulk_wait<0>();  // every reduction done before the thread block's SRAM is released
#endif

    // line 18: dK_j = τ dK_j and dV_j to HBM, straight from registers (zeros for keys no query sees)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int k_h = key + 8 * h;
        if (k_h >= Nk) continue;
#if VARLEN  // (total_k, Hkv, d)
        const size_t at = ((size_t)(kv_row + k_h) * kv_heads + kv_plane) * HEAD_DIM + 2 * t;
#else
        const size_t at = ((size_t)bh * Nk + k_h) * HEAD_DIM + 2 * t;
#endif
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; ++n) {
            *reinterpret_cast<u32*>(dK + at + 8 * n) = pack2(scale * dk[4 * n + 2 * h], scale * dk[4 * n + 2 * h + 1]);
            *reinterpret_cast<u32*>(dV + at + 8 * n) = pack2(dv[4 * n + 2 * h], dv[4 * n + 2 * h + 1]);
        }
    }
#if FUSED_DQ
    // dQ of this query plane, rounded by the last of its thread blocks to finish: both warpgroups' reduce-adds have
    // landed (bulk_wait above), the block counts itself once, and the last rounds the plane's accumulator from L2
    if (items == 0) return;  // a thread block no query sees added nothing: it is not counted
    if (tid == 0) asm volatile("fence.proxy.async.global;\n" ::: "memory");
    bool last = false;
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
    if (c == 0 && tid == 0) {
        int before;
        asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(before) : "l"(arrivals + bh) : "memory");
        last = before == visitors(Tr - 1, gridDim.x, shift, causal) - 1;
    }
    if (consumers_any(last)) {
        const float* acc = dQacc + (size_t)bh * N * HEAD_DIM;
        elem_t* out = dQ + (size_t)bh * N * HEAD_DIM;
        const long long chunks = (long long)N * HEAD_DIM / 8;  // 8 columns: two 16-byte loads, one 16-byte store
        for (long long e0 = c * 128 + tid; e0 < chunks; e0 += 256 * ROUND_BATCH) {
            float4 x[ROUND_BATCH][2];
#pragma unroll
            for (int k = 0; k < ROUND_BATCH; ++k)
                if (e0 + 256 * k < chunks) {
                    x[k][0] = __ldcg(reinterpret_cast<const float4*>(acc + 8 * (e0 + 256 * k)));
                    x[k][1] = __ldcg(reinterpret_cast<const float4*>(acc + 8 * (e0 + 256 * k) + 4));
                }
#pragma unroll
            for (int k = 0; k < ROUND_BATCH; ++k)
                if (e0 + 256 * k < chunks)
                    store_16(out + 8 * (e0 + 256 * k), make_uint4(pack2(x[k][0].x, x[k][0].y), pack2(x[k][0].z, x[k][0].w),
                                                                 pack2(x[k][1].x, x[k][1].y), pack2(x[k][1].z, x[k][1].w)));
            // the accumulator's lines are dead once rounded: dropped from L2 unwritten (no write-back to HBM; the
            // pre-pass zeroes them before the next call reads them). A 128-byte line is 4 chunks, of 4 lanes of
            // this warp, whose loads its stores above waited for (run 41: ×1.009 at N = 1K)
            __syncwarp();
#pragma unroll
            for (int k = 0; k < ROUND_BATCH; ++k)
                if (e0 + 256 * k < chunks && (e0 + 256 * k) % 4 == 0)
                    asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(acc + 8 * (e0 + 256 * k)) : "memory");
        }
    }
#endif
}
