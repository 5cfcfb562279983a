// racecheck_probe.cu: does compute-sanitizer's racecheck see an mbarrier hand-off? Rung 6's ticket ring (06's
// header) passes (i, plane) from the producer thread to the consumers through SRAM: the consumers read a slot, then
// arrive on an mbarrier; the producer waits on its phase and only then writes the slot again. racecheck reports
// that pair as a write-after-read hazard (run 42; run 43 with every warpgroup meeting at a named barrier after its
// read, too). This kernel is the hand-off alone, three ways, one thread block of 256 threads: warpgroup 0 is the
// producer (thread 0 writes), warpgroup 1 the consumers (all 128 threads read the same 8 bytes):
//   HANDOFF 0, none: the producer writes while the consumers read — a race (racecheck must report it);
//   HANDOFF 1, mbarrier: every consumer thread arrives on an mbarrier of 128 arrivals after its read (release), the
//              producer waits on the phase (acquire) and then writes — ordered by the PTX memory model;
//   HANDOFF 2, bar.sync: all 256 threads meet at __syncthreads between the reads and the write — ordered, in the
//              form racecheck tracks;
//   HANDOFF 3, a named barrier: each consumer arrives (bar.arrive 1, 160: not waiting) after its read, the producer
//              thread waits there (barrier.sync 1, 160: its warp counts 32) before its write — rung 6's ring since
//              run 43.
// `python -m gpu.lab.racecheck_probe` runs each build under racecheck and prints its hazards (gpu/NOTES.md run 43).
// Injected #defines: STORAGE (common.cuh's; unused), HANDOFF (0 … 3).

#include "common.cuh"
#include "hopper.cuh"  // mbar_init, mbar_init_fence, mbar_arrive, mbar_wait, ld_shared_v2, st_shared_v2

#ifndef HANDOFF
#define HANDOFF 1
#endif

// out: the 128 consumers' reads (each the first write's value, 16, unless the race lands the second's, 0)
extern "C" __global__ void __launch_bounds__(256) racecheck_probe(int* __restrict__ out)
{
    __shared__ __align__(8) int slot[2];
    __shared__ __align__(8) unsigned long long emptied;  // the mbarrier: every consumer has read the slot
    const u32 bar = smem_u32(&emptied), ring = smem_u32(slot);
    if (threadIdx.x == 0) {
        slot[0] = 16;
        slot[1] = 1;
        mbar_init(bar, 128);
        mbar_init_fence();
    }
    __syncthreads();  // the first write and the barrier's init, before everything below
    if (threadIdx.x >= 128) {  // the consumers
        int i, plane;
        ld_shared_v2(ring, i, plane);  // as rung 6's consumers read their slot
        out[threadIdx.x - 128] = i * plane;
        if (HANDOFF == 1) mbar_arrive(bar);
        if (HANDOFF == 3) asm volatile("bar.arrive 1, 160;\n" ::: "memory");
    }
    if (HANDOFF == 2) __syncthreads();
    if (threadIdx.x == 0) {  // the producer
        if (HANDOFF == 1) mbar_wait(bar, 0);
        if (HANDOFF == 3) asm volatile("barrier.sync 1, 160;\n" ::: "memory");
        st_shared_v2(ring, 0, -1);  // as rung 6's producer writes a slot
    }
}
