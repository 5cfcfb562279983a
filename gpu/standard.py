"""Standard attention on the GPU, the baseline: Algorithm 0 (S and P written to device memory) and its backward,
Algorithm 3 (reads the stored P; writes dP and dS), both cuBLAS matmuls around one row kernel, in q's dtype."""

import numpy as np

from gpu import device, inputs, registry, source
from sim.core.dtypes import F
from sim.core.errors import InputError

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUDA_TYPE = {"float16": 2, "bfloat16": 14}  # cudaDataType CUDA_R_16F, CUDA_R_16BF
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1


def standard_attention(q, k, v, *, causal=False, scale=None, return_probs=False, check_finite=False):
    """o = softmax(scale · q kᵀ) v with S = q kᵀ and P written to device memory in q's dtype (fp16/bf16).

    With `return_probs`, (o, P): P (batch, heads, N, Nk) is what `standard_attention_backward` reads.
    `check_finite` refuses NaN/Inf inputs (a pass over q, k, v and a synchronization).
    """
    cupy = device.require()
    inputs.check_flag("return_probs", return_probs)
    p = inputs.check(q, k, v, causal=causal, scale=scale, dtypes_allowed=registry.HALF, finite=check_finite)
    _check_row_fits(p.nk, 1)
    with q.device:
        s = cupy.empty((p.batch, p.heads, p.n, p.nk), dtype=q.dtype)
        _matmul(p, q, k, s, trans_b=True)  # line 1: S = Q Kᵀ
        probs = cupy.empty_like(s)
        _rows(p, "softmax", (s, probs, np.int32(p.n), np.int32(p.nk), np.float32(p.scale), np.int32(p.causal)), 1)
        del s  # line 2: P = softmax(S)
        o = cupy.empty_like(q)
        _matmul(p, probs, v, o)  # line 3: O = P V
    return (o, probs) if return_probs else o


def standard_attention_backward(q, k, v, probs, do, *, scale=None, check_finite=False):
    """(dq, dk, dv) of standard attention from the stored P (`standard_attention(…, return_probs=True)`) and do.

    The FlashAttention paper's Algorithm 3: dV = Pᵀ dO; dP = dO Vᵀ (written); dS = P ∘ (dP − rowsum(P ∘ dP))
    (written); dQ = τ dS K; dK = τ dSᵀ Q. P is zero where a causal mask hid a key, so no mask is needed.
    """
    cupy = device.require()
    p = inputs.check(q, k, v, causal=False, scale=scale, dtypes_allowed=registry.HALF, finite=check_finite)
    inputs.check_like_q(p, q, finite=check_finite, do=do)
    if not isinstance(probs, cupy.ndarray) or probs.shape != (p.batch, p.heads, p.n, p.nk) or probs.dtype != q.dtype:
        raise InputError(
            f"probs: expected P from standard_attention(…, return_probs=True), shaped {(p.batch, p.heads, p.n, p.nk)} in {q.dtype}"
        )
    _check_row_fits(p.nk, 2)
    with q.device:
        dv = cupy.empty_like(v)
        _matmul(p, probs, do, dv, trans_a=True)  # line 1: dV = Pᵀ dO
        dp = cupy.empty_like(probs)
        _matmul(p, do, v, dp, trans_b=True)  # line 2: dP = dO Vᵀ
        ds = cupy.empty_like(probs)
        _rows(p, "softmax_backward", (probs, dp, ds, np.int32(p.nk)), 2)  # line 3: dS = P ∘ (dP − D)
        del dp
        dq, dk = cupy.empty_like(q), cupy.empty_like(k)
        _matmul(p, ds, k, dq, alpha=p.scale)  # line 4: dQ = τ dS K
        _matmul(p, ds, q, dk, trans_a=True, alpha=p.scale)  # line 5: dK = τ dSᵀ Q
    return dq, dk, dv


def _check_row_fits(nk: int, rows_held: int) -> None:
    """The row kernels keep `rows_held` rows of Nk floats in shared memory: refuse an Nk that cannot fit."""
    limit = device.properties()["smem_per_block_optin"] // (F * rows_held) - registry.SOFTMAX_THREADS // 32
    if nk > limit:
        raise InputError(
            f"k: standard attention keeps whole rows of S in shared memory; Nk must be at most {limit}, got {nk}"
        )


def _rows(p, helper: str, args: tuple, rows_held: int) -> None:
    """One thread block per row of S: the softmax (forward) or dS = P ∘ (dP − D) (backward)."""
    spec = registry.HELPERS[helper]
    smem = F * (rows_held * p.nk + registry.SOFTMAX_THREADS // 32)
    fn = source.function(spec, spec.defines(p.d, p.dtype), smem)
    fn((p.batch * p.heads * p.n, 1, 1), (registry.SOFTMAX_THREADS, 1, 1), args, shared_mem=smem)


def _matmul(p, a, b, c, *, trans_a=False, trans_b=False, alpha=1.0) -> None:
    """c = alpha · op(a) op(b) per (batch, head), row-major, fp32 accumulation (cuBLAS through CuPy).

    cuBLAS is column-major, where a row-major (r × c) matrix reads as its transpose: so it computes
    cᵀ = op(b)ᵀ op(a)ᵀ, with each operand's transpose flag flipped by that reading.
    """
    cupy = device.require()
    (a_rows, a_cols), (b_rows, b_cols), (c_rows, c_cols) = a.shape[-2:], b.shape[-2:], c.shape[-2:]
    k = a_rows if trans_a else a_cols
    handle = cupy.cuda.device.get_cublas_handle()
    cupy.cuda.cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    one, zero = np.full(1, alpha, np.float32), np.zeros(1, np.float32)
    t = CUDA_TYPE[p.dtype]
    cupy.cuda.cublas.gemmStridedBatchedEx(
        handle, CUBLAS_OP_T if trans_b else CUBLAS_OP_N, CUBLAS_OP_T if trans_a else CUBLAS_OP_N, c_cols, c_rows, k,
        one.ctypes.data, b.data.ptr, t, b_cols, b_rows * b_cols, a.data.ptr, t, a_cols, a_rows * a_cols,
        zero.ctypes.data, c.data.ptr, t, c_cols, c_rows * c_cols, p.batch * p.heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT,
    )  # fmt: skip
