"""`flash_attention`: the FlashAttention-2 forward kernels (v1 readable, v2 tensor cores) behind one call."""

import math

import numpy as np

from gpu import device, inputs, source, tiling
from sim.errors import InputError


def flash_attention(q, k, v, *, causal=False, scale=None, kernel=None, tiles=None, poison=False, check_finite=True):
    """Attention of q (batch, heads, N, d) against k, v (batch, heads, Nk, d) → (o like q, lse float32 (batch, heads, N)).

    lse is the natural log-sum-exp of each row of scaled logits (−∞ for a row that sees no key, whose o is zeros).
    `kernel`: "v2" (tensor cores, fp16/bf16; the default) or "v1" (readable, also float32).
    `tiles` overrides the kernel's tiling (gpu.tiling.Tiles); `poison` fills the outputs with NaN before the
    launch, so that an element the kernel fails to write shows up (the tests use it). `check_finite` refuses
    NaN/Inf inputs at the cost of a pass over q, k, v and a synchronization; timings turn it off.
    """
    cupy = device.require()
    kernel = tiling.DEFAULT_KERNEL if kernel is None else kernel
    if kernel not in tiling.FLASH_KERNELS:
        raise InputError(f"kernel: expected one of {', '.join(tiling.FLASH_KERNELS)}, got {kernel!r}")
    p = inputs.check(q, k, v, causal=causal, scale=scale, dtypes_allowed=tiling.DTYPES[kernel], finite=check_finite)
    tiles = tiles or tiling.default_tiles(kernel, p.d)
    row = tiling.padded_dims(p.d)[0] if kernel == "v2" else p.d
    with q.device:
        q, k, v = (_rows_of(x, row) for x in (q, k, v))
        o = cupy.empty((p.batch, p.heads, p.n, row), dtype=q.dtype)
        lse = cupy.empty((p.batch, p.heads, p.n), dtype=cupy.float32)
        if poison:
            o.view(cupy.uint16 if o.dtype.itemsize == 2 else cupy.uint32).fill(
                0x7FFF if o.dtype.itemsize == 2 else 0x7FC00000
            )
            lse.fill(cupy.nan)
        launch(kernel, p, tiles, q, k, v, o, lse)
    return (o if row == p.d else cupy.ascontiguousarray(o[..., : p.d])), lse


def launch(kernel: str, p, tiles, q, k, v, o, lse) -> None:
    """One launch of `kernel` on prepared arrays (rows padded to the kernel's row length, outputs allocated)."""
    smem = tiling.smem_bytes(kernel, p.d, tiles)
    fn = source.function(kernel, tiling.defines(kernel, p.d, p.dtype, tiles), smem)
    grid = (-(-p.n // tiles.block_rows), p.batch * p.heads, 1)
    scale = p.scale * math.log2(math.e) if kernel == "v2" else p.scale
    args = (q, k, v, o, lse, np.int32(p.n), np.int32(p.nk), np.float32(scale), np.int32(p.causal))
    fn(grid, (tiles.threads, 1, 1), args, shared_mem=smem)


def _rows_of(x, row: int):
    """`x` with its last axis zero-padded to `row` elements and its data 16-byte aligned (a copy only if needed)."""
    cupy = device.require()
    if x.shape[-1] != row:
        padded = cupy.zeros((*x.shape[:-1], row), dtype=x.dtype)
        padded[..., : x.shape[-1]] = x
        return padded
    return x if x.data.ptr % 16 == 0 else x.copy()
