"""`flash_attention`: the FlashAttention-2 forward kernels (rungs 1–3 and 6 of gpu/registry.py) behind one call, and
the variants rungs 3 and 6 take (gpu/variants.py)."""

import dataclasses
import functools
import math

import numpy as np

from gpu import device, inputs, layout, registry, source, tma, variants
from sim.core.errors import InputError

PLAIN = variants.Variant()


def flash_attention(
    q, k, v, *, causal=False, scale=None, window=None, alibi_slopes=None, softcap=None, cu_seqlens_q=None,
    cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False, kernel=None, tiles=None, poison=False,
    check_finite=False,
):  # fmt: skip
    """Attention of q (batch, heads, N, d) against k, v (batch, heads, Nk, d): o like q, or (o, lse) with return_lse.

    lse (float32, (batch, heads, N)) is the natural log-sum-exp of each row of scaled logits, what the backward
    pass needs (−∞ for a row that sees no key, whose o is zeros). The default call does no pass over the inputs
    beyond the kernel's and no host synchronization: NaN in the inputs flows through as it does through attention.
    `kernel`: the rung, 1 (readable, also float32), 2 or 3 (tensor cores, fp16/bf16), 6 (wgmma and TMA: sm_90,
    d = 64 or 128); None picks rung 6 where it runs, else rung 3. The old names "v1" … "v4" still work, with a warning.
    `tiles` overrides the kernel's tiling (gpu.tiling.Tiles); `poison` fills the outputs with NaN before the
    launch, so that an element the kernel fails to write shows up (the tests use it); `check_finite` refuses
    NaN/Inf inputs, for debugging, at the cost of a pass over q, k, v and a synchronization.
    The variants (rungs 3 and 6; gpu/variants.py, the simulator's conventions): k, v with fewer heads (GQA),
    `window` (left, right), `alibi_slopes` (Hq,) or (B, Hq), `softcap` c; a packed batch with `cu_seqlens_q`,
    `cu_seqlens_k` (B + 1) and q (total_q, Hq, d), k, v (total_k, Hkv, d), o like q and lse (total_q, Hq) as the
    simulator's (a transposed view: stored (Hq, total_q), FlashAttention's layout).
    """
    cupy = device.require()
    inputs.check_flag("return_lse", return_lse)
    spec = registry.forward(kernel)
    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        p, kv_heads, packed = variants.check_packed(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal, scale=scale,
            dtypes_allowed=spec.dtypes,
        )  # fmt: skip
        if check_finite:
            inputs.check_finite(p.dtype, q=q, k=k, v=v)
    else:
        if max_seqlen_q is not None or max_seqlen_k is not None:
            raise InputError("max_seqlen_q, max_seqlen_k: only for a packed batch (with cu_seqlens_q and cu_seqlens_k)")
        p = inputs.check(q, k, v, causal=causal, scale=scale, dtypes_allowed=spec.dtypes, finite=check_finite, gqa=True)
        kv_heads, packed = k.shape[1], None
    variant = variants.check(p, kv_heads, window=window, alibi_slopes=alibi_slopes, softcap=softcap, packed=packed)
    spec = resolve(kernel, p.d)
    if not variant.plain and not spec.variants:
        raise InputError(
            f"kernel: {spec.name} takes no variant (GQA, window, ALiBi, softcap, packed); rungs 3 and 6 do"
        )
    tiles = spec.tiles_for(p.d, p.n, p.causal, tiles)
    row = spec.row(p.d)
    with q.device:
        q, k, v = (layout.rows_of(x, row) for x in (q, k, v))
        o = cupy.empty((*q.shape[:-1], row), dtype=q.dtype)
        lse = cupy.empty(
            q.shape[-2::-1] if variant.packed else q.shape[:-1], dtype=cupy.float32
        )  # packed: (Hq, total_q)
        if poison:
            layout.poison(o, lse)
        launch(spec, p, tiles, q, k, v, o, lse, variant)
    o, lse = layout.trimmed(o, p.d), lse.T if variant.packed else lse
    return (o, lse) if return_lse else o


def resolve(kernel: str | None, d: int) -> registry.KernelSpec:
    """The forward kernel for head dim d on this GPU: `kernel` if it runs here (else InputError saying why), or the
    default (without a GPU: the default anywhere, rung 3)."""
    cc = device.capability() if device.available()[0] else None
    spec = registry.forward(kernel, d, cc)
    why = cc and spec.fits(d, cc)
    if why:
        raise InputError(f"kernel: {why}")
    return spec


def launch(spec: registry.KernelSpec, p, tiles, q, k, v, o, lse, variant=PLAIN) -> None:
    """One launch of a forward kernel on prepared arrays (rows padded to the kernel's row length, outputs allocated);
    a variant adds its #defines and arguments (a packed batch: grid (Tr of the longest, Hq, B)). A persistent tiling
    (rung 6) launches at most one thread block per SM, for a plain call or GQA; the other variants (timed only so
    far one thread block per tile, run 31; a packed batch finds its sequence from blockIdx) get one per tile."""
    if tiles.persistent and variant.kinds not in ((), ("gqa",)):
        tiles = dataclasses.replace(tiles, persistent=False)
    smem = spec.smem(p.d, tiles)
    defines = spec.defines(p.d, p.dtype, tiles) | variant.defines()
    fn = source.function(spec, defines, smem)
    tr = -(-p.n // tiles.block_rows)
    planes = p.batch * p.heads
    if tiles.persistent:  # the kernel's units: a tile, or causal a pair of tiles of one plane
        grid = (min(planes * (-(-tr // 2) if p.causal else tr), _sm_count(q.device.id)), 1, 1)
    else:
        grid = (tr, p.heads, p.batch) if variant.packed else (tr, planes, 1)
    scale = p.scale * math.log2(math.e) if spec.scale_log2 else p.scale
    if spec.tma:  # rung 6 reads Q, K, V through tensor maps: Q_i in boxes of Br rows, K_j and V_j of Bc
        tensor_map = tma.packed_map if variant.packed else tma.rows_map
        q, k, v = (
            tensor_map(x, rows) for x, rows in ((q, tiles.block_rows), (k, tiles.block_cols), (v, tiles.block_cols))
        )
    args = (q, k, v, o, lse, np.int32(p.n), np.int32(p.nk), np.float32(scale), np.int32(p.causal))
    if spec.tma:
        args += (np.int32(planes),)
    args += variant.args(p)
    if defines.get("O_TMA"):  # O_i leaves by TMA stores, a box of one warpgroup's 64 rows each
        args += (tma.rows_map(o, 64),)
    fn(grid, (tiles.threads, 1, 1), args, shared_mem=smem)


@functools.cache
def _sm_count(device_id: int) -> int:
    return device.require().cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]
