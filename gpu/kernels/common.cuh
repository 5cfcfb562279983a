// common.cuh: the device helpers every kernel in gpu/kernels/ shares. A kernel file includes it by name;
// gpu/source.py puts this file in that line's place, so NVRTC and `nvcc -ptx` each compile one
// self-contained source.
//
// Needs STORAGE: the dtype of every tensor in HBM but the float32 statistics (0 float32, 1 float16,
// 2 bfloat16). The tensor-core helpers (ldmatrix, mma, pack2) exist for STORAGE 1 and 2 only.

#define NEG_INF __int_as_float(0xff800000)  // −∞ (NVRTC has no INFINITY macro: host headers define it)
#define LOG2E 1.4426950408889634f
#define LN2 0.69314718055994531f

typedef unsigned int u32;

#if STORAGE == 0
typedef float storage_t;
__device__ __forceinline__ float to_float(storage_t x) { return x; }
__device__ __forceinline__ storage_t from_float(float x) { return x; }
#else
typedef unsigned short storage_t;  // the 16 bits of a float16 or a bfloat16
__device__ __forceinline__ float to_float(storage_t x) {
#if STORAGE == 1
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
#else
    return __uint_as_float(((u32)x) << 16);
#endif
}
__device__ __forceinline__ storage_t from_float(float x) {  // round to nearest even, as the simulator's HBM.write
    storage_t h;
#if STORAGE == 1
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
#else
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
#endif
    return h;
}
#endif

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// 16 bytes HBM → SRAM without passing through registers; src_bytes = 0 writes zeros and reads nothing
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
}
// 4 bytes HBM → SRAM (one float32 statistic); src_bytes = 0 writes zeros
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float log2_approx(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// *p += (a, b) for two adjacent floats in HBM: one vector reduction on sm_90, two atomics before
__device__ __forceinline__ void atomic_add_f32x2(float* p, float a, float b) {
#if __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

// every thread of the block gets op(x of every thread) (op: max or +); `scratch` holds one float per warp, in SRAM
template <bool MAX>
__device__ float block_reduce(float x, float* scratch) {
    for (int k = 16; k > 0; k /= 2) {
        const float y = __shfl_xor_sync(0xffffffff, x, k);
        x = MAX ? fmaxf(x, y) : x + y;
    }
    __syncthreads();  // scratch is free (a previous reduction has been read by everyone)
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
    __syncthreads();
    x = scratch[0];
    for (int w = 1; w < (int)(blockDim.x / 32); ++w) x = MAX ? fmaxf(x, scratch[w]) : x + scratch[w];
    return x;
}

#if STORAGE != 0
typedef unsigned short elem_t;  // the 16 bits of a float16 or bfloat16, for the tensor-core kernels

// four 8×8 b16 matrices from SRAM into MMA fragments; lane L gives the address of row L % 8 of matrix L / 8
__device__ __forceinline__ void ldmatrix_x4(u32 r[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// the same, each matrix transposed on the way (the fragment of the stored matrix's transpose)
__device__ __forceinline__ void ldmatrix_x4_trans(u32 r[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// c (16×8, fp32) += a (16×16, row-major) · b (16×8, column-major)
__device__ __forceinline__ void mma_16816(float c[4], const u32 a[4], u32 b0, u32 b1) {
#if STORAGE == 2
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
#endif
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One 16-byte store, one instruction, whatever the front end can prove of the address: NVVM turned rung 6's
// `*(uint4*)p = x` for columns 0 … 31 into four st.global.u32 in the packed build (run 35-var2: L2 took ×1.17–1.24 of
// the predicted writes) and in two of the four copies of the store in the persistent builds (PTX; run 36's compare
// wrote ×1.776 of the predicted bytes at d = 64, N = 1024, causal, which we attribute to it: not split by source)
__device__ __forceinline__ void store_16(void* p, uint4 x) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w) : "memory");
}

// two fp32 → one register of two fp16/bf16, `lo` in the low half (the lower column)
__device__ __forceinline__ u32 pack2(float lo, float hi) {
    u32 r;
#if STORAGE == 2
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

// The A fragment (16×16) of a product whose left operand is an accumulator tile pair: n-tiles 2k and 2k + 1
// of c (16×8 fp32 each) rounded to fp16/bf16 — how P̃ = exp(S) feeds P̃ V without leaving registers.
__device__ __forceinline__ void accumulators_to_a(u32 a[4], const float lo[4], const float hi[4]) {
    a[0] = pack2(lo[0], lo[1]);
    a[1] = pack2(lo[2], lo[3]);
    a[2] = pack2(hi[0], hi[1]);
    a[3] = pack2(hi[2], hi[3]);
}

#ifdef SROW
// Tiles of (rows, HEAD_DIM) matrices in SRAM, for kernels that define HEAD_DIM (row length in HBM), D_MMA (the
// row padded to 16), SROW (the SRAM row stride, in elements), CHUNKS (D_MMA / 8), NTHREADS and SWIZZLE first.

// where element (row, col) of a shared-memory tile lives; with SWIZZLE, the 16-byte chunk col / 8 of each
// group of 8 moves to chunk (col / 8) XOR (row mod 8), so ldmatrix's 8 rows hit 8 different bank groups
__device__ __forceinline__ int at(int row, int col) {
#if SWIZZLE
    const int chunk = col >> 3;
    return row * SROW + (((chunk & ~7) | ((chunk ^ row) & 7)) << 3) + (col & 7);
#else
    return row * SROW + col;
#endif
}

// rows row0 … row0 + ROWS − 1 of an (nrows, HEAD_DIM) matrix in HBM (rows `stride` elements apart) → an (ROWS,
// SROW) tile in SRAM, zeros for rows ≥ nrows and for the columns HEAD_DIM … D_MMA − 1 (they add nothing to any dot
// product)
template <int ROWS>
__device__ __forceinline__ void load_tile(elem_t* tile, const elem_t* hbm, int row0, int nrows, int tid, int stride = HEAD_DIM) {
#pragma unroll
    for (int it = 0; it < (ROWS * CHUNKS + NTHREADS - 1) / NTHREADS; ++it) {
        const int chunk = tid + it * NTHREADS;
        if (ROWS * CHUNKS % NTHREADS == 0 || chunk < ROWS * CHUNKS) {
            const int r = chunk / CHUNKS, k = (chunk % CHUNKS) * 8;
            const bool inside = row0 + r < nrows && k < HEAD_DIM;
            const elem_t* src = inside ? hbm + (size_t)(row0 + r) * stride + k : hbm;
            cp_async_16(tile + at(r, k), src, inside ? 16 : 0);
        }
    }
}
#endif  // SROW
#endif  // STORAGE != 0
