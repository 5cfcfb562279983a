// hopper_probe.cu: the toolchain proof behind rung 6 (`python -m gpu.lab.hopper_probe`). One warpgroup, one tile:
// TMA copies into SRAM, then both forms of wgmma rung 6 uses, each result written out in fp32 for NumPy to check.
//   S (64 × BC) = A (64 × HEAD_DIM) · B (BC × HEAD_DIM)ᵀ   wgmma_ss: both operands K-major in SRAM, as Q_i K_jᵀ
//   C (64 × HEAD_DIM) = P (64 × BC) · V (BC × HEAD_DIM)    wgmma_rs: P from registers, V N-major in SRAM, as P̃_ij V_j
// It compiles with NVRTC for sm_90a, makes tensor maps on the host and passes them as __grid_constant__
// parameters, and places the tiles as rung 6 does; a wrong descriptor field shows here as a wrong matrix.
//
// Injected #defines: HEAD_DIM (64 or 128), BC (64 or 128), STORAGE (1 fp16, 2 bf16).

#include "common.cuh"  // pack2, smem_u32
#include "hopper.cuh"  // TMA, mbarrier, wgmma

// A_map: (1, 64, HEAD_DIM), B_map and V_map: (1, BC, HEAD_DIM), boxes of (1, rows, 64); P: (64, BC); S, C: fp32.
// Grid: 1 thread block of 128 threads, 1024 + (64 + 2 · BC) · HEAD_DIM · 2 + 8 bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(128)
hopper_probe(const __grid_constant__ TensorMap A_map, const __grid_constant__ TensorMap B_map,
             const __grid_constant__ TensorMap V_map, const elem_t* __restrict__ P, float* __restrict__ S,
             float* __restrict__ C)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 sA = (smem_u32(smem) + 1023) & ~1023u;
    const u32 sB = sA + 64 * HEAD_DIM * 2, sV = sB + BC * HEAD_DIM * 2, bar = sV + BC * HEAD_DIM * 2;
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        mbar_init_fence();
        mbar_expect_tx(bar, (64 + 2 * BC) * HEAD_DIM * 2);
        for (int p = 0; p < HEAD_DIM / 64; ++p) {
            tma_load_3d(sA + p * 64 * 128, &A_map, bar, p * 64, 0, 0);
            tma_load_3d(sB + p * BC * 128, &B_map, bar, p * 64, 0, 0);
            tma_load_3d(sV + p * BC * 128, &V_map, bar, p * 64, 0, 0);
        }
    }
    __syncthreads();
    mbar_wait(bar, 0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int row = warp * 16 + g;  // this lane's rows: row and row + 8

    float s[BC / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
        const u32 at = (kk % 4) * 32;
        wgmma_ss(s, sw128_desc(sA + (kk / 4) * 64 * 128 + at, 16), sw128_desc(sB + (kk / 4) * BC * 128 + at, 16), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    keep(s);

    u32 p[BC / 16][4];  // P's A fragments, straight from HBM: rows row, row + 8; columns 16·kk + 2t (+ 8)
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
        const elem_t* top = P + row * BC + 16 * kk + 2 * t;
        const elem_t* bottom = top + 8 * BC;
        p[kk][0] = *reinterpret_cast<const u32*>(top);
        p[kk][1] = *reinterpret_cast<const u32*>(bottom);
        p[kk][2] = *reinterpret_cast<const u32*>(top + 8);
        p[kk][3] = *reinterpret_cast<const u32*>(bottom + 8);
    }
    float o[HEAD_DIM / 2];
#pragma unroll
    for (int e = 0; e < HEAD_DIM / 2; ++e) o[e] = 0.f;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) wgmma_rs(o, p[kk], sw128_desc(sV + kk * 2048, BC * 128));
    wgmma_commit();
    wgmma_wait<0>();
    keep(o);
    keep(p);

    // accumulator n-tile n, element e: row + 8·(e / 2), column 8·n + 2t + e % 2
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[(row + 8 * (e >> 1)) * BC + 8 * n + 2 * t + (e & 1)] = s[4 * n + e];
#pragma unroll
    for (int n = 0; n < HEAD_DIM / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) C[(row + 8 * (e >> 1)) * HEAD_DIM + 8 * n + 2 * t + (e & 1)] = o[4 * n + e];
}
