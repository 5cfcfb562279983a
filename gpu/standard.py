"""`standard_attention`: Algorithm 0 on the GPU, S and P written to device memory (the baseline)."""

import numpy as np

from gpu import device, inputs, source, tiling
from sim.errors import InputError

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUDA_TYPE = {"float16": 2, "bfloat16": 14}  # cudaDataType CUDA_R_16F, CUDA_R_16BF
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1


def standard_attention(q, k, v, *, causal=False, scale=None, check_finite=True):
    """o = softmax(scale · q kᵀ) v with S = q kᵀ and P written to device memory in q's dtype (fp16/bf16).

    `check_finite` refuses NaN/Inf inputs (a pass over q, k, v and a synchronization); timings turn it off.
    """
    cupy = device.require()
    p = inputs.check(q, k, v, causal=causal, scale=scale, dtypes_allowed=tiling.DTYPES["softmax"], finite=check_finite)
    smem = 4 * (p.nk + 32)
    if smem > device.properties()["smem_per_block_optin"]:
        raise InputError(
            f"k: standard attention keeps a row of S in shared memory; Nk must be at most {device.properties()['smem_per_block_optin'] // 4 - 32}, got {p.nk}"
        )
    with q.device:
        s = cupy.empty((p.batch, p.heads, p.n, p.nk), dtype=q.dtype)
        _gemm(
            p, CUBLAS_OP_T, CUBLAS_OP_N, p.nk, p.n, p.d, k, p.d, p.nk * p.d, q, p.d, p.n * p.d, s, p.nk, p.n * p.nk
        )  # line 1: S = Q Kᵀ
        probs = cupy.empty_like(s)
        softmax_rows(s, probs, p)  # line 2: P = softmax(S)
        del s
        o = cupy.empty_like(q)
        _gemm(
            p, CUBLAS_OP_N, CUBLAS_OP_N, p.d, p.n, p.nk, v, p.d, p.nk * p.d, probs, p.nk, p.n * p.nk, o, p.d, p.n * p.d
        )  # line 3: O = P V
    return o


def softmax_rows(s, probs, p) -> None:
    """P = softmax(scale · S) over the last axis, masked; one thread block per row."""
    defines = tiling.defines("softmax", p.d, p.dtype)
    smem = 4 * (p.nk + defines["NTHREADS"] // 32)
    fn = source.function("softmax", defines, smem)
    args = (s, probs, np.int32(p.n), np.int32(p.nk), np.float32(p.scale), np.int32(p.causal))
    fn((p.batch * p.heads * p.n, 1, 1), (defines["NTHREADS"], 1, 1), args, shared_mem=smem)


def _gemm(p, op_a, op_b, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c) -> None:
    """Column-major, batched over batch·heads: C = op(A) op(B), fp32 accumulation (cuBLAS through CuPy)."""
    cupy = device.require()
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    t = CUDA_TYPE[p.dtype]
    cupy.cuda.cublas.gemmStridedBatchedEx(
        cupy.cuda.device.get_cublas_handle(),
        op_a,
        op_b,
        m,
        n,
        k,
        one.ctypes.data,
        a.data.ptr,
        t,
        lda,
        stride_a,
        b.data.ptr,
        t,
        ldb,
        stride_b,
        zero.ctypes.data,
        c.data.ptr,
        t,
        ldc,
        stride_c,
        p.batch * p.heads,
        CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT,
    )
