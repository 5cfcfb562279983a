// hopper.cuh: the sm_90a PTX that rungs 6 and 7 use, one small wrapper per instruction. A kernel includes it after
// common.cuh (gpu/source.py inlines both); it compiles only for sm_90a (`-arch=sm_90a`: wgmma and setmaxnreg exist
// on no other target). PTX ISA features and why each is here:
//  - cp.async.bulk.tensor (TMA): one thread copies a whole tile HBM → SRAM, addressing it by tile coordinates in a
//    tensor map made on the host; out-of-range rows arrive as zeros, and the tile lands in the 128-byte swizzled
//    layout wgmma reads without bank conflicts. It frees the other threads from address arithmetic.
//  - mbarrier with transaction counts: a TMA copy completes on a barrier in SRAM, counting its bytes; the consumers
//    wait on the barrier's phase. The same barriers, counting arrivals, tell the producer that a stage is free.
//  - wgmma.mma_async: a warpgroup (4 warps, 128 threads) multiplies a 64-row tile with operands read straight
//    from SRAM (or A from registers), asynchronously: the warps run softmax while the tensor cores work.
//  - setmaxnreg: the producer warpgroup gives registers back so the two consumer warpgroups can hold S, P and O.
// Rung 6 also prefetches Q_i into L2 (tma_prefetch_3d) and stores O_i by TMA (tma_store_3d) in its persistent walk,
// whose producer hands the consumers their tiles through SRAM (st_shared_v2, ld_shared_v2).
// Rung 7 (the backward) uses the same wrappers, plus wgmma_ss_nmajor (B N-major from SRAM), fence_proxy_async, a
// plain bulk copy (bulk_load: L_i and D_i) and TMA's reduce-add from SRAM into HBM (tma_reduce_add_3d: dQ_i).

typedef unsigned long long u64;

#if STORAGE == 2
#define WGMMA_AB ".bf16.bf16"
#else
#define WGMMA_AB ".f16.f16"
#endif

// CUtensorMap (cuda.h): 128 opaque bytes, made by cuTensorMapEncodeTiled on the host (gpu/tma.py) and passed
// as a __grid_constant__ kernel parameter, so the TMA unit reads it from parameter space
struct __align__(64) TensorMap {
    u64 opaque[16];
};

// -- mbarrier ------------------------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(u32 bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals));
}
// the initialised barriers become visible to the TMA unit (the async proxy) before any copy signals them
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}
// one arrival that also announces `bytes` the phase must receive from TMA copies before it completes
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// wait until the barrier's phase with this parity (0, 1, 0, … for its 1st, 2nd, 3rd … phase) has completed
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

// -- TMA ------------------------------------------------------------------------------------------------------

// the box at coordinates (c0, c1, c2) of a 3-d tensor (innermost first) → SRAM at `dst`, completing on `bar`
__device__ __forceinline__ void tma_load_3d(u32 dst, const TensorMap* map, u32 bar, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
                 ::"r"(dst), "l"((u64)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}

// the box at (c0, c1, c2) HBM → L2 only, no SRAM and no barrier: a later tma_load_3d of it then hits in L2
__device__ __forceinline__ void tma_prefetch_3d(const TensorMap* map, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n"
                 ::"l"((u64)map), "r"(c0), "r"(c1), "r"(c2) : "memory");
}

// `bytes` (a multiple of 16) from 16-byte-aligned HBM → SRAM, no tensor map, completing on `bar`
__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// HBM box at (c0, c1, c2) += the box in SRAM at `src` (float32 maps), element by element in L2; rows past the
// tensor's end are skipped. Completes as a bulk group: commit, then wait (.read: SRAM may be overwritten)
__device__ __forceinline__ void tma_reduce_add_3d(const TensorMap* map, u32 src, int c0, int c1, int c2) {
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 ::"l"((u64)map), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// SRAM at `src` (a box in the 128-byte swizzled layout) → the HBM box at (c0, c1, c2); rows past the tensor's end
// are skipped. Completes as a bulk group, like tma_reduce_add_3d
__device__ __forceinline__ void tma_store_3d(const TensorMap* map, u32 src, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 ::"l"((u64)map), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int PENDING> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}
template <int PENDING> __device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// -- registers ------------------------------------------------------------------------------------------------

template <int REGS> __device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS)); }
template <int REGS> __device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS)); }

// -- wgmma ----------------------------------------------------------------------------------------------------

// The SRAM matrix descriptor of a tile in the 128-byte swizzled layout TMA writes: rows of 64 fp16/bf16 (128
// bytes), 8-row groups of 1024 bytes (the stride-dimension offset); `leading` is the byte distance between
// 64-column pieces, used when the tile is N-major (V_j), ignored when it is K-major (Q_i, K_j).
__device__ __forceinline__ u64 sw128_desc(u32 addr, u32 leading) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(leading >> 4) << 16) | ((u64)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// registers an in-flight wgmma reads or writes: the compiler must neither move their uses across the wait that
// follows nor reuse them for something else before it
template <int SIZE> __device__ __forceinline__ void keep(float (&r)[SIZE]) {
#pragma unroll
    for (int i = 0; i < SIZE; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int SIZE> __device__ __forceinline__ void keep(u32 (&r)[SIZE][4]) {
#pragma unroll
    for (int i = 0; i < SIZE; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(r[i][e])::"memory");
}

// d (64×64, fp32, 32 per thread) = A (64×16, SRAM, K-major) · B (64×16, SRAM, K-major)ᵀ (+ d if `accumulate`)
__device__ __forceinline__ void wgmma_ss(float (&d)[32], u64 a, u64 b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" WGMMA_AB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(accumulate));
}

// d (64×128, fp32, 64 per thread) = A (64×16, SRAM, K-major) · B (128×16, SRAM, K-major)ᵀ (+ d if `accumulate`)
__device__ __forceinline__ void wgmma_ss(float (&d)[64], u64 a, u64 b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" WGMMA_AB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a), "l"(b), "r"(accumulate));
}

// d (64×64, fp32) = A (64×16, SRAM, K-major) · B (16×64, SRAM, N-major) (+ d if `accumulate`): rung 7's
// dQ_i = dS_ij K_j, A from dS_ij written to SRAM, B from K_j (its rows are the keys, the k dimension here)
__device__ __forceinline__ void wgmma_ss_nmajor(float (&d)[32], u64 a, u64 b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" WGMMA_AB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 1;\n}\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(accumulate));
}

// the same with n = 32: half of a 64-column piece of B (its start 64 bytes into the 128-byte swizzled rows)
__device__ __forceinline__ void wgmma_ss_nmajor(float (&d)[16], u64 a, u64 b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32" WGMMA_AB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 1;\n}\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(a), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ void st_shared_32(u32 addr, u32 x) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(x) : "memory");
}
// two ints to and from SRAM (rung 6's ring of tiles: the producer writes, the consumers read after an mbarrier wait)
__device__ __forceinline__ void st_shared_v2(u32 addr, int a, int b) {
    asm volatile("st.shared.v2.s32 [%0], {%1, %2};\n" ::"r"(addr), "r"(a), "r"(b) : "memory");
}
__device__ __forceinline__ void ld_shared_v2(u32 addr, int& a, int& b) {
    asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];\n" : "=r"(a), "=r"(b) : "r"(addr) : "memory");
}

// ordinary stores to SRAM become visible to the async proxy (wgmma's operand reads) once the writer has fenced
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d (64×64, fp32) += A (64×16, registers: the A fragments of 4 fp16/bf16 pairs) · B (16×64, SRAM, N-major)
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const u32 (&a)[4], u64 b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32" WGMMA_AB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

// d (64×128, fp32) += A (64×16, registers: the A fragments of 4 fp16/bf16 pairs) · B (16×128, SRAM, N-major)
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const u32 (&a)[4], u64 b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32" WGMMA_AB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
                 :
                 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
