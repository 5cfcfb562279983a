"""`flash_attention`: the FlashAttention-2 forward kernels (rungs 1–3 of gpu/registry.py) behind one call."""

import math

import numpy as np

from gpu import device, inputs, layout, registry, source


def flash_attention(
    q, k, v, *, causal=False, scale=None, return_lse=False, kernel=None, tiles=None, poison=False, check_finite=False
):
    """Attention of q (batch, heads, N, d) against k, v (batch, heads, Nk, d): o like q, or (o, lse) with return_lse.

    lse (float32, (batch, heads, N)) is the natural log-sum-exp of each row of scaled logits, what the backward
    pass needs (−∞ for a row that sees no key, whose o is zeros). The default call does no pass over the inputs
    beyond the kernel's and no host synchronization: NaN in the inputs flows through as it does through attention.
    `kernel`: "v1" (readable, also float32), "v2" or "v3" (tensor cores, fp16/bf16); None is the default.
    `tiles` overrides the kernel's tiling (gpu.tiling.Tiles); `poison` fills the outputs with NaN before the
    launch, so that an element the kernel fails to write shows up (the tests use it); `check_finite` refuses
    NaN/Inf inputs, for debugging, at the cost of a pass over q, k, v and a synchronization.
    """
    cupy = device.require()
    spec = registry.forward(kernel)
    inputs.check_flag("return_lse", return_lse)
    p = inputs.check(q, k, v, causal=causal, scale=scale, dtypes_allowed=spec.dtypes, finite=check_finite)
    tiles = spec.tiles(p.d, tiles)
    row = spec.row(p.d)
    with q.device:
        q, k, v = (layout.rows_of(x, row) for x in (q, k, v))
        o = cupy.empty((p.batch, p.heads, p.n, row), dtype=q.dtype)
        lse = cupy.empty((p.batch, p.heads, p.n), dtype=cupy.float32)
        if poison:
            layout.poison(o, lse)
        launch(spec, p, tiles, q, k, v, o, lse)
    o = layout.trimmed(o, p.d)
    return (o, lse) if return_lse else o


def launch(spec: registry.KernelSpec, p, tiles, q, k, v, o, lse) -> None:
    """One launch of a forward kernel on prepared arrays (rows padded to the kernel's row length, outputs allocated)."""
    smem = spec.smem(p.d, tiles)
    fn = source.function(spec, spec.defines(p.d, p.dtype, tiles), smem)
    grid = (-(-p.n // tiles.block_rows), p.batch * p.heads, 1)
    scale = p.scale * math.log2(math.e) if spec.scale_log2 else p.scale
    args = (q, k, v, o, lse, np.int32(p.n), np.int32(p.nk), np.float32(scale), np.int32(p.causal))
    fn(grid, (tiles.threads, 1, 1), args, shared_mem=smem)
