// racecheck_probe.cu: which SRAM hand-offs does compute-sanitizer's racecheck follow? Rung 6's ticket ring (06's
// header) passes (i, plane) from the producer thread to the consumers through SRAM: the consumers read a slot, the
// producer writes it again once an mbarrier says they are done. racecheck reported that pair as a write-after-read
// while one thread arrived for its warpgroup (run 42), and still when the warpgroup met at a bar.sync before that
// thread's arrival (run 43). This kernel is the hand-off alone, eight ways, one thread block of 256 threads:
// warpgroup 0 is the producer (thread 0 writes), warpgroup 1 the consumers (all 128 threads read the same 8 bytes):
//   HANDOFF 0, none: the producer writes while the consumers read — a race (racecheck must report it);
//   HANDOFF 1, an mbarrier of 128 arrivals: every consumer thread arrives after its read (release), the producer
//              waits on the phase (acquire), then writes;
//   HANDOFF 2, an mbarrier of 1 arrival: the consumers meet at a named barrier (bar.sync 1, 128) after their reads,
//              then thread 128 alone arrives; the producer waits, then writes — ordered too (bar.sync orders the
//              warpgroup's reads before thread 128's arrival): run 43's first try in rung 6, still reported there;
//   HANDOFF 3, a named barrier: each consumer arrives (bar.arrive 1, 160: not waiting) after its read, the producer
//              thread waits there (barrier.sync 1, 160: its warp counts 32) before its write;
//   HANDOFF 4, an mbarrier of 4 arrivals: each consumer warp meets (bar.warp.sync) after its reads, then its lane 0
//              arrives; the producer waits, then writes;
//   HANDOFF 5, an mbarrier of 4 arrivals: lane 0 of each consumer warp alone reads, hands the values to its warp by
//              shuffles, then arrives; the producer waits, then writes (rung 6's ring since run 44);
//   HANDOFF 6, as 2, but the producer's write is a bulk copy (cp.async.bulk) from global memory, as rung 7's
//              producer refills a stage's L_i, D_i after its EMPTY wait;
//   HANDOFF 7, as 1, with that bulk copy.
// `python -m gpu.lab.racecheck_probe` runs each build under racecheck and prints its reports (gpu/NOTES.md run 43).
// Injected #defines: STORAGE (common.cuh's; unused), HANDOFF (0 … 7).

#include "common.cuh"
#include "hopper.cuh"  // mbar_init, mbar_init_fence, mbar_arrive, mbar_wait, ld_shared_v2, st_shared_v2

#ifndef HANDOFF
#define HANDOFF 1
#endif

#define BULK (HANDOFF >= 6)                                      // the producer writes by a bulk copy
#define ONE_ARRIVES (HANDOFF == 2 || HANDOFF == 6)                // bar.sync, then thread 128 arrives
#define EVERY_ARRIVES (HANDOFF == 1 || HANDOFF == 7)              // each consumer arrives after its read
#define LANE0_ARRIVES (HANDOFF == 4 || HANDOFF == 5)              // lane 0 of each consumer warp arrives

// out: the 128 consumers' reads (each the first write's value, 16, unless the race lands the second's, 0), then 4
// ints the bulk copies write into the slot (0, −1, 0, 0: as the stop sign)
extern "C" __global__ void __launch_bounds__(256) racecheck_probe(int* __restrict__ out)
{
    __shared__ __align__(16) int slot[4];
    __shared__ __align__(8) unsigned long long emptied;  // the mbarrier: every consumer has read the slot
    __shared__ __align__(8) unsigned long long filled;   // BULK: the copy has landed
    const u32 bar = smem_u32(&emptied), ring = smem_u32(slot), landed = smem_u32(&filled);
    if (threadIdx.x == 0) {
        slot[0] = 16;
        slot[1] = 1;
        mbar_init(bar, ONE_ARRIVES ? 1 : LANE0_ARRIVES ? 4 : 128);
        mbar_init(landed, 1);
        mbar_init_fence();
    }
    __syncthreads();  // the first write and the barrier's init, before everything below
    if (threadIdx.x >= 128) {  // the consumers
        int i = 0, plane = 0;
        if (HANDOFF != 5 || threadIdx.x % 32 == 0) ld_shared_v2(ring, i, plane);  // as rung 6's consumers read their slot
        if (HANDOFF == 5) {
            i = __shfl_sync(0xffffffffu, i, 0);
            plane = __shfl_sync(0xffffffffu, plane, 0);
        }
        out[threadIdx.x - 128] = i * plane;
        if (EVERY_ARRIVES) mbar_arrive(bar);
        if (ONE_ARRIVES) {
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            if (threadIdx.x == 128) mbar_arrive(bar);
        }
        if (HANDOFF == 3) asm volatile("bar.arrive 1, 160;\n" ::: "memory");
        if (HANDOFF == 4) __syncwarp();
        if (LANE0_ARRIVES && threadIdx.x % 32 == 0) mbar_arrive(bar);
    }
    if (threadIdx.x == 0) {  // the producer
        if (HANDOFF != 0 && HANDOFF != 3) mbar_wait(bar, 0);
        if (HANDOFF == 3) asm volatile("barrier.sync 1, 160;\n" ::: "memory");
        if (BULK) {  // as rung 7's producer refills a stage
            mbar_expect_tx(landed, 16);
            bulk_load(ring, out + 128, 16, landed);
            mbar_wait(landed, 0);
        } else {
            st_shared_v2(ring, 0, -1);  // as rung 6's producer writes a slot
        }
    }
}
