"""`flash_attention_backward`: dQ, dK, dV from the saved log-sum-exp (rungs 4, 5 and 7 of gpu/registry.py), in three
launches.

The pre-pass computes D = rowsum(dO ∘ O) and zeroes a float32 dQ accumulator; the main kernel (one thread block
per K/V block) recomputes P from L tile by tile and adds τ dS K into dQ with atomics; the last pass rounds dQ to the
storage dtype. Extra device memory: D (N floats) and the accumulator (N·d floats) per head, O(N).
"""

import numpy as np

from gpu import device, inputs, layout, registry, source, tma
from sim.core.errors import InputError

PREPASS_WARPS = 8  # rows per thread block of the pre-pass (one warp each)
DQ_THREADS = 256


def flash_attention_backward(
    q, k, v, o, lse, do, *, causal=False, scale=None, kernel=None, tiles=None, poison=False, check_finite=False
):
    """(dq, dk, dv), shaped and typed like (q, k, v), for the forward output o, its lse and the upstream gradient do.

    o and lse are what `flash_attention(q, k, v, causal=…, scale=…, return_lse=True)` returned; pass the same
    causal and scale. `kernel`: the rung, 4 (readable, also float32), 5 (tensor cores, fp16/bf16) or 7 (wgmma and TMA: sm_90, d = 64 or 128); None: the default for d on this GPU.
    `tiles`, `poison` and `check_finite` are as for `flash_attention` (the check covers o and do too).
    """
    cupy = device.require()
    spec = registry.backward(kernel)
    p = inputs.check(q, k, v, causal=causal, scale=scale, dtypes_allowed=spec.dtypes, finite=check_finite)
    inputs.check_backward(p, q, o, lse, do, finite=check_finite)
    spec = resolve(kernel, p.d)
    tiles = spec.tiles(p.d, tiles)
    row = spec.row(p.d)
    with q.device:
        q, k, v, o, do = (layout.rows_of(x, row) for x in (q, k, v, o, do))
        lse = lse if lse.data.ptr % 16 == 0 else lse.copy()
        D = cupy.empty((p.batch, p.heads, p.n), dtype=cupy.float32)
        dq_acc = cupy.empty((p.batch, p.heads, p.n, row), dtype=cupy.float32)
        dq, dk, dv = cupy.empty_like(q), cupy.empty_like(k), cupy.empty_like(v)
        if poison:
            layout.poison(dq, dk, dv)
        launch(spec, p, tiles, row, (q, k, v, o, lse, do), (D, dq_acc), (dq, dk, dv))
    return tuple(layout.trimmed(x, p.d) for x in (dq, dk, dv))


def resolve(kernel, d: int) -> registry.KernelSpec:
    """The backward kernel for head dim d on this GPU: `kernel` if it runs here (else InputError saying why), or the
    default (without a GPU: the default anywhere, rung 5)."""
    cc = device.capability() if device.available()[0] else None
    spec = registry.backward(kernel, d, cc)
    why = cc and spec.fits(d, cc)
    if why:
        raise InputError(f"kernel: {why}")
    return spec


def launch(spec: registry.KernelSpec, p, tiles, row: int, ins: tuple, work: tuple, outs: tuple) -> None:
    """The three launches on prepared arrays: ins = (q, k, v, o, lse, do) with rows of `row` elements, work = (D,
    dq_acc) float32, outs = (dq, dk, dv), all allocated by the caller (the autograd path allocates them in PyTorch)."""
    q, k, v, o, lse, do = ins
    D, dq_acc = work
    dq, dk, dv = outs
    prepass(p, row, o, do, D, dq_acc)
    smem = spec.smem(p.d, tiles)
    fn = source.function(spec, spec.defines(p.d, p.dtype, tiles), smem)
    grid = (-(-p.nk // tiles.block_cols), p.batch * p.heads, 1)
    if spec.tma:  # rung 7: Q_i and dO_i in boxes of Br rows, K_j and V_j of Bc
        br, bc = tiles.block_rows, tiles.block_cols
        q, do, k, v = (tma.rows_map(x, rows) for x, rows in ((q, br), (do, br), (k, bc), (v, bc)))
    args = (q, k, v, do, lse, D, dq_acc, dk, dv, np.int32(p.n), np.int32(p.nk), np.float32(p.scale), np.int32(p.causal))
    fn(grid, (tiles.threads, 1, 1), args, shared_mem=smem)
    round_dq(p, row, dq_acc, dq)


def prepass(p, row: int, o, do, D, dq_acc) -> None:
    """The FlashAttention-2 paper's Algorithm 2, lines 3–4: D = rowsum(dO ∘ O) and dQ = 0 (the float32 accumulator)."""
    spec = registry.HELPERS["bwd_prepass"]
    rows = p.batch * p.heads * p.n
    fn = source.function(spec, spec.defines(row, p.dtype, None))
    fn((-(-rows // PREPASS_WARPS), 1, 1), (32 * PREPASS_WARPS, 1, 1), (o, do, D, dq_acc, np.int32(rows)))


def round_dq(p, row: int, dq_acc, dq) -> None:
    """dQ = the float32 accumulator, rounded once to the storage dtype."""
    spec = registry.HELPERS["bwd_dq"]
    n = dq.size
    fn = source.function(spec, spec.defines(row, p.dtype, None))
    blocks = min(-(-n // DQ_THREADS), 65535)
    fn((blocks, 1, 1), (DQ_THREADS, 1, 1), (dq_acc, dq, np.int64(n)))
