"""`decode`: Flash-Decoding (rung 8, gpu/kernels/08_flash_decoding.cu) of a few query rows against a long K/V cache.

The names and conventions are `sim.decode`'s: q (B, Hq, Nq, d) against a contiguous k, v (B, Hkv, Nk, d), or a
paged k_cache, v_cache (num_pages, page_size, Hkv, d) with `block_table` (B, pages per sequence) and
`cache_seqlens` (B,); GQA packed (Hq = g·Hkv, the g query heads of a K/V head in one thread block); the keys split
into `splits` chunks (None: the number sim.machine.occupancy finds fastest for this GPU's preset; with a CuPy block
table it is asked about the table's capacity, pages per sequence × page_size, as the lengths stay on the GPU);
causal masks aligned bottom-right.

Paged arguments are never copied to the host to be checked (that would synchronize every step): block_table and
cache_seqlens given as CuPy arrays have their shapes and dtypes checked here and their values on the GPU, where a
sequence whose length is outside 1 … pages per sequence × page_size, or that reads a block-table entry outside
0 … num_pages − 1, gets NaN rows (o and lse) and the first such entry is written to a flag in pinned host memory;
the next `decode` call, `decode_errors()`, or this call with `check=True` (one synchronization) raises it as a
one-line InputError. Given as NumPy arrays (or lists), they are on the host already and are checked before any
launch, as sim.decode checks them.

Host cost per call: the argument checks are cached by what they read (`prepare`), the kernel's scalar arguments by
their values; the split partials, the combine's tickets and, where the caller does not ask for it, the lse are
workspaces kept per (stream, shape) and reused (the combine is fused into the split kernel: `launch`), so a call
allocates only o (and lse with return_lse) and makes one launch, through cuLaunchKernel with its parameters packed
once (`_launch`) rather than CuPy's call, which converts each of them.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np

from gpu import decode_launch, device, dtypes, geometry, inputs, pages, registry
from gpu.decode_launch import MERGES, NULL, kernels, launch_kernel, merge_for, scalars
from gpu.registry import HALF
from sim.core.errors import InputError
from sim.machine import hardware
from sim.machine.occupancy import best_splits

KERNEL = registry.DECODE[8]
MAX_SPLITS = 128  # the combine's MAX_SPLITS (and best_splits' default cap)
COMBINE_ROWS = 8  # rows of O per combine thread block (COMBINE_ROWS in the kernel)
CHECKED = 64  # prepare's checked signatures kept
LAYOUTS = {"q": "(B, Hq, Nq, d)", "k": "(B, Hkv, Nk, d), or paged (num_pages, page_size, Hkv, d)"}
LAYOUTS["v"] = LAYOUTS["k"]


@dataclass(slots=True)
class Plan:
    """One checked decode call: the arrays the kernels take and their launch geometry."""

    q: object
    k: object
    v: object
    table: object  # int32 (B, pages per sequence) on the device, or None (contiguous)
    seqlens: object  # int32 (B,) on the device, or None; values checked on the host already, or by the kernel
    batch: int
    hkv: int
    g: int
    nq: int
    d: int
    nk: int  # contiguous: the keys; paged: the longest sequence (NumPy lengths) or the table's capacity (CuPy)
    page_size: int
    num_pages: int
    splits: int
    scale: float
    causal: bool


def decode(
    q, k, v, *, block_table=None, cache_seqlens=None, causal=False, scale=None, splits=None, return_lse=False,
    check=False,
):  # fmt: skip
    """o (like q), or (o, lse) with return_lse: lse (float32, (B, Hq, Nq)) is each row's natural log-sum-exp of
    scaled logits (−∞ for a row that sees no key, whose o is zeros). Paged: `block_table`, `cache_seqlens` are
    integer arrays: NumPy (checked here, before any launch) or CuPy (checked by the kernel without a synchronization:
    a refused sequence's rows are NaN and the next call, `decode_errors()`, or `check=True` raises it)."""
    cupy = device.require()
    inputs.check_flag("return_lse", return_lse)
    inputs.check_flag("check", check)
    plan = prepare(q, k, v, block_table, cache_seqlens, causal, scale, splits)
    with q.device:
        pages.raise_reported(cupy, q.device.id, sync=False)
        o, lse = launch(cupy, plan, lse=return_lse)
        if check:
            pages.raise_reported(cupy, q.device.id, sync=True)
    return (o, lse) if return_lse else o


def decode_errors() -> None:
    """Wait for the current GPU and raise (one-line InputError) the first block_table or cache_seqlens entry a decode
    kernel refused since the last report; nothing if none did."""
    cupy = device.require()
    pages.raise_reported(cupy, cupy.cuda.Device().id, sync=True)


def prepare(q, k, v, block_table, cache_seqlens, causal, scale, splits) -> Plan:
    """Every argument checked (one-line InputError naming it) and the number of splits chosen. What the checks read
    (types, shapes, dtypes, layouts and devices of CuPy arrays, and the scalars) keys a cache of their outcome, so
    that a decode step with the arguments of the step before costs a lookup, not the checks (a NumPy block table's
    values are checked on every call)."""
    cupy = device.require()
    key = _signature(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits)
    cached = _checked.get(key) if key is not None else None
    if cached is None:
        plan = _prepare(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits)
        if key is not None:
            if len(_checked) >= CHECKED:
                del _checked[next(iter(_checked))]
            direct = plan.table is block_table and plan.seqlens is cache_seqlens  # int32, C-contiguous: as given
            _checked[key] = direct, (plan.batch, plan.hkv, plan.g, plan.nq, plan.d, plan.nk, plan.page_size,
                                     plan.num_pages, plan.splits, plan.scale, plan.causal)  # fmt: skip
        return plan
    direct, static = cached
    if block_table is None or direct:  # the key holds the dtypes and layouts that made them direct
        return Plan(q, k, v, block_table, cache_seqlens, *static)
    return Plan(q, k, v, pages.as_int32(cupy, block_table), pages.as_int32(cupy, cache_seqlens), *static)


def _signature(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits):
    """What prepare's checks read, hashable; None where they read more (a block table on the host: its values) or
    something a key cannot hold."""
    arrays = (q, k, v) if block_table is None and cache_seqlens is None else (q, k, v, block_table, cache_seqlens)
    if any(type(x) is not cupy.ndarray for x in arrays):
        return None
    key = (len(arrays), *((x.shape, x.dtype, x.flags.c_contiguous, x.data.device_id) for x in arrays),
           type(causal), causal, type(scale), scale, type(splits), splits)  # fmt: skip
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _prepare(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits) -> Plan:
    inputs.check_flag("causal", causal)
    for name, x in (("q", q), ("k", k), ("v", v)):
        inputs.check_array(name, x, q, HALF, shape=LAYOUTS[name])
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise InputError(f"k, v: dtypes must equal q's ({q.dtype}), got k {k.dtype}, v {v.dtype}")
    batch, hq, nq, d = q.shape
    if d not in KERNEL.head_dims:
        raise InputError(f"q: head dim d = {d}; rung 8 takes d = 64 or 128")
    if k.shape != v.shape:
        raise InputError(f"k, v: shapes must be equal, got k {tuple(k.shape)}, v {tuple(v.shape)}")
    paged = block_table is not None or cache_seqlens is not None
    if paged:
        num_pages, page_size, hkv, kd = k.shape
        layout = "(num_pages, page_size, Hkv, d)"
    else:
        kb, hkv, nk, kd = k.shape
        num_pages, page_size = 0, 0
        layout = "(B, Hkv, Nk, d)"
        if kb != batch:
            raise InputError(f"k: batch {kb} differs from q's {batch}; a contiguous cache is {layout}")
    if kd != d:
        raise InputError(f"k: head dim {kd} differs from q's {d}; the cache is {layout}")
    if hq % hkv:
        raise InputError(f"q: {hq} query heads are not a multiple of the cache's {hkv} K/V heads; GQA needs Hq = g·Hkv")
    g = hq // hkv
    geometry.decoding_tiles(d, g * nq)  # refuses more than 64 packed rows
    if batch * hkv > inputs.MAX_BATCH_HEADS:
        raise InputError(f"batch · Hkv: at most {inputs.MAX_BATCH_HEADS}, got {batch * hkv}")
    table = seqlens = None
    if paged and pages.on_gpu(block_table) and pages.on_gpu(cache_seqlens):
        pages.check_page_shapes(block_table, cache_seqlens, batch)
        table, seqlens = (pages.as_int32(cupy, x) for x in (block_table, cache_seqlens))
        nk = table.shape[1] * page_size  # the lengths stay on the GPU: the model is asked about the table's capacity
    elif paged:
        table_host, seqlens_host = pages.check_pages(block_table, cache_seqlens, batch, num_pages, page_size)
        nk = int(seqlens_host.max())
        table, seqlens = cupy.asarray(table_host), cupy.asarray(seqlens_host)
    hw = _hardware(q.device.id)
    if splits is None:
        splits = _best_splits(batch * hkv, g * nq, nk, d, q.dtype.itemsize, hw.name, paged)
    elif isinstance(splits, bool) or not isinstance(splits, (int, np.integer)) or not 1 <= splits <= MAX_SPLITS:
        raise InputError(
            f"splits: expected an integer in 1 … {MAX_SPLITS} (None: the occupancy model's), got {splits!r}"
        )
    elif not paged and splits > nk:
        raise InputError(f"splits: {splits} chunks of the {nk} keys would leave some empty; choose 1 … {nk}")
    return Plan(q, k, v, table, seqlens, batch, hkv, g, nq, d, nk, page_size, num_pages, int(splits),
                _scale(scale, d), causal)  # fmt: skip


def launch(cupy, p: Plan, tiles=None, fused=True, lse=True, merge=None):
    """The split kernel with the combine fused (`merge`, None: `merge_for`'s choice — a cluster of the group's blocks,
    all the group's blocks of a cooperative grid, or the last block to finish), or (fused=False) then the combine
    kernel: (o, lse) freshly allocated, the partials in a reused workspace; lse=False: (o, None), the kernel's lse
    written into the workspace. `tiles` overrides the geometry, `fused` and `merge` the combine (gpu.lab)."""
    rows = p.batch * p.hkv * p.g * p.nq
    o = cupy.empty(p.q.shape, p.q.dtype)
    parts, lse_parts, tickets, scratch = decode_launch.workspace(cupy, p.splits, rows, p.d, p.batch * p.hkv)
    L = cupy.empty(p.q.shape[:3], cupy.float32) if lse else scratch
    if p.splits == 1:
        parts, lse_parts, tickets = o, L, NULL
    dtype, paged, groups = dtypes.name(p.q.dtype), p.table is not None, p.batch * p.hkv
    asked, merge = merge, None
    if fused and p.splits > 1:
        merge = asked or merge_for(p.q.device.id, p.d, dtype, p.g * p.nq, tiles, p.splits, groups, paged, p.nk)
    cluster = p.splits if merge == "cluster" else 1  # the kernel ignores tickets then
    split, combine, tiles, smem = kernels(p.d, dtype, p.g * p.nq, tiles, cluster, merge == "spread")
    if asked is not None and merge is not None:  # gpu.lab's choice (a cluster at any split length): one it can take
        resident = decode_launch.resident(split, tiles.threads, smem) * decode_launch.sm_count(p.q.device.id)
        can = {"ticket": True, "cluster": not paged and 1 < p.splits <= decode_launch.MAX_CLUSTER,
               "spread": p.splits * groups <= resident}  # fmt: skip
        if not can.get(merge):
            raise ValueError(f"merge: {merge!r} is not one of {MERGES} that this call can take")
    table, seqlens = (NULL if x is None else x for x in (p.table, p.seqlens))
    max_pages = 0 if p.table is None else p.table.shape[1]
    _, errors, claim = pages.errors(p.q.device.id)
    arrays = (p.q, p.k, p.v, table, seqlens, o, L, parts, lse_parts, tickets if fused else NULL, errors, claim)
    values = (*(int(x) if type(x) is np.uintp else x.data.ptr for x in arrays),
              *scalars(p.nq, p.g, p.nk, p.page_size, max_pages, p.num_pages, p.splits, p.scale, p.causal))  # fmt: skip
    launch_kernel(cupy, split, (p.splits, p.hkv, p.batch), tiles.threads, smem, values, cooperative=merge == "spread")
    if p.splits > 1 and not fused:
        args = (parts, lse_parts, seqlens, o, L, np.int32(rows), np.int32(p.hkv * p.g * p.nq), np.int32(p.splits),
                np.int32(p.page_size), np.int32(max_pages))  # fmt: skip
        combine((-(-rows // COMBINE_ROWS),), (32 * COMBINE_ROWS, 1, 1), args)
    return o, (L if lse else None)


_checked = {}


def _scale(scale, d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"scale: expected a positive finite number (default 1/sqrt(d)), got {scale!r}")
    return float(scale)


@functools.cache
def _hardware(device_id: int) -> hardware.Hardware:
    """The simulator's preset for this GPU (the default preset for one it has none of)."""
    return device.preset_for(device.properties()["name"]) or hardware.get(hardware.DEFAULT)


@functools.lru_cache(maxsize=256)
def _best_splits(groups: int, rows: int, nk: int, d: int, s: int, preset: str, paged: bool) -> int:
    """sim.decode's choice: best_splits for `groups` (sequence, K/V head) programs of `rows` packed query rows (a
    paged cache: sim.machine.occupancy's paged rule)."""
    return best_splits(groups, 1, rows, nk, d, s, hardware.get(preset), paged=paged)
