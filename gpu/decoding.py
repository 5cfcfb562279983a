"""`decode`: Flash-Decoding (rung 8, gpu/kernels/08_flash_decoding.cu) of a few query rows against a long K/V cache.

The names and conventions are `sim.decode`'s: q (B, Hq, Nq, d) against a contiguous k, v (B, Hkv, Nk, d), or a
paged k_cache, v_cache (num_pages, page_size, Hkv, d) with `block_table` (B, pages per sequence) and
`cache_seqlens` (B,); GQA packed (Hq = g·Hkv, the g query heads of a K/V head in one thread block); the keys split
into `splits` chunks (None: the number sim.machine.occupancy finds fastest for this GPU's preset); causal masks
aligned bottom-right.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np

from gpu import device, dtypes, geometry, inputs, registry, source
from gpu.registry import HALF
from sim.core.errors import InputError
from sim.machine import hardware
from sim.machine.occupancy import best_splits

KERNEL = registry.DECODE[8]
COMBINE = registry.HELPERS["decode_combine"]
MAX_SPLITS = 128  # the combine kernel's MAX_SPLITS (and best_splits' default cap)
COMBINE_ROWS = 8  # rows of O per combine thread block (COMBINE_ROWS in the kernel)
NULL = np.uintp(0)  # a null pointer argument: a contiguous cache has no block table
LAYOUTS = {"q": "(B, Hq, Nq, d)", "k": "(B, Hkv, Nk, d), or paged (num_pages, page_size, Hkv, d)"}
LAYOUTS["v"] = LAYOUTS["k"]


@dataclass(frozen=True)
class Plan:
    """One checked decode call: the arrays the kernels take and their launch geometry."""

    q: object
    k: object
    v: object
    table: object  # int32 (B, pages per sequence) on the device, or None (contiguous)
    seqlens: object  # int32 (B,) on the device, or None
    batch: int
    hkv: int
    g: int
    nq: int
    d: int
    nk: int  # contiguous: the keys; paged: the longest sequence
    page_size: int
    num_pages: int
    splits: int
    scale: float
    causal: bool


def decode(q, k, v, *, block_table=None, cache_seqlens=None, causal=False, scale=None, splits=None, return_lse=False):
    """o (like q), or (o, lse) with return_lse: lse (float32, (B, Hq, Nq)) is each row's natural log-sum-exp of
    scaled logits (−∞ for a row that sees no key, whose o is zeros). Paged: `block_table`, `cache_seqlens` are
    integer arrays (NumPy or CuPy); their values are checked on the host (a CuPy one costs a copy and a sync)."""
    cupy = device.require()
    plan = prepare(q, k, v, block_table, cache_seqlens, causal, scale, splits)
    inputs.check_flag("return_lse", return_lse)
    with q.device:
        o, lse = launch(cupy, plan)
    return (o, lse) if return_lse else o


def prepare(q, k, v, block_table, cache_seqlens, causal, scale, splits) -> Plan:
    """Every argument checked (one-line InputError naming it) and the number of splits chosen."""
    cupy = device.require()
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
    if paged:
        table_host, seqlens_host = check_pages(block_table, cache_seqlens, batch, num_pages, page_size)
        nk = int(seqlens_host.max())
        table, seqlens = (
            _on_device(cupy, given, host) for given, host in ((block_table, table_host), (cache_seqlens, seqlens_host))
        )
    hw = _hardware(q.device.id)
    if splits is None:
        splits = _best_splits(batch * hkv, g * nq, nk, d, q.dtype.itemsize, hw.name)
    elif isinstance(splits, bool) or not isinstance(splits, (int, np.integer)) or not 1 <= splits <= MAX_SPLITS:
        raise InputError(
            f"splits: expected an integer in 1 … {MAX_SPLITS} (None: the occupancy model's), got {splits!r}"
        )
    elif not paged and splits > nk:
        raise InputError(f"splits: {splits} chunks of the {nk} keys would leave some empty; choose 1 … {nk}")
    return Plan(q, k, v, table, seqlens, batch, hkv, g, nq, d, nk, page_size, num_pages, int(splits),
                _scale(scale, d), causal)  # fmt: skip


def launch(cupy, p: Plan, tiles=None):
    """The split kernel, then (more than one split) the combine: (o, lse) freshly allocated. `tiles` overrides the
    default geometry (gpu.lab.bench_decode's tuning)."""
    rows = p.batch * p.hkv * p.g * p.nq
    o = cupy.empty(p.q.shape, p.q.dtype)
    lse = cupy.empty(p.q.shape[:3], cupy.float32)
    parts = cupy.empty((p.splits, rows, p.d), cupy.float32) if p.splits > 1 else o
    lse_parts = cupy.empty((p.splits, rows), cupy.float32) if p.splits > 1 else lse
    split, combine, tiles, smem = _kernels(p.d, dtypes.name(p.q.dtype), p.g * p.nq, tiles)
    table = NULL if p.table is None else p.table
    seqlens = NULL if p.seqlens is None else p.seqlens
    max_pages = 0 if p.table is None else p.table.shape[1]
    args = (p.q, p.k, p.v, table, seqlens, o, lse, parts, lse_parts, np.int32(p.nq), np.int32(p.g), np.int32(p.nk),
            np.int32(p.page_size), np.int32(max_pages), np.int32(p.num_pages), np.int32(p.splits),
            np.float32(p.scale * math.log2(math.e)), np.int32(p.causal))  # fmt: skip
    split((p.splits, p.hkv, p.batch), (tiles.threads, 1, 1), args, shared_mem=smem)
    if p.splits > 1:
        args = (parts, lse_parts, seqlens, o, lse, np.int32(rows), np.int32(p.hkv * p.g * p.nq), np.int32(p.splits),
                np.int32(p.page_size))  # fmt: skip
        combine((-(-rows // COMBINE_ROWS),), (32 * COMBINE_ROWS, 1, 1), args)
    return o, lse


def check_pages(block_table, cache_seqlens, batch: int, num_pages: int, page_size: int):
    """(block_table, cache_seqlens) as int32 host arrays: cache_seqlens (B,) in 1 … pages per sequence × page_size,
    block_table (B, pages per sequence), every entry a sequence uses in 0 … num_pages − 1 (sim.api.paged's rules)."""
    if block_table is None or cache_seqlens is None:
        missing = "block_table" if block_table is None else "cache_seqlens"
        raise InputError(f"{missing}: a paged cache needs both block_table and cache_seqlens")
    table, seqlens = _host(block_table), _host(cache_seqlens)
    if table.ndim != 2 or table.shape[0] != batch or not np.issubdtype(table.dtype, np.integer) or table.shape[1] < 1:
        raise InputError(
            f"block_table: must be integers shaped ({batch}, pages per sequence), got {table.dtype} {table.shape}"
        )
    if seqlens.shape != (batch,) or not np.issubdtype(seqlens.dtype, np.integer):
        raise InputError(
            f"cache_seqlens: must be {batch} integers (one per sequence), got {seqlens.dtype} {seqlens.shape}"
        )
    longest = table.shape[1] * page_size
    bad = (seqlens < 1) | (seqlens > longest)
    if bad.any():
        b = int(np.argmax(bad))
        raise InputError(f"cache_seqlens: sequence {b} has {int(seqlens[b])} keys; choose 1 … {longest} "
                         f"({table.shape[1]} pages of {page_size} in block_table)")  # fmt: skip
    used = np.arange(table.shape[1])[None, :] < -(-seqlens[:, None] // page_size)  # (B, pages): entries read
    bad = used & ((table < 0) | (table >= num_pages))
    if bad.any():
        b, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"block_table: entry [{b}, {j}] = {int(table[b, j])} points past the cache's {num_pages} "
                         f"pages; choose 0 … {num_pages - 1}")  # fmt: skip
    return table.astype(np.int32), seqlens.astype(np.int32)


def _on_device(cupy, given, host: np.ndarray):
    """The checked int32 values on the GPU: `given` itself where it is already a C-contiguous int32 CuPy array (what the
    host copy was read from; work queued after that copy cannot change it before the launch), else `host` uploaded."""
    if isinstance(given, cupy.ndarray) and given.dtype == np.int32 and given.flags.c_contiguous:
        return given
    return cupy.asarray(host)


def _host(x) -> np.ndarray:
    """A NumPy copy of an integer argument given as NumPy, CuPy (one device-to-host copy) or a list."""
    return x.get() if type(x).__module__.startswith("cupy") else np.asarray(x)


def _scale(scale, d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"scale: expected a positive finite number (default 1/sqrt(d)), got {scale!r}")
    return float(scale)


@functools.cache
def _kernels(d: int, dtype: str, rows: int, tiles=None):
    """(split kernel, combine kernel, tiles, shared memory) for head dim d and `rows` packed query rows, cached: a
    decode step's host time is mostly Python (at Nk = 4K a step moves its bytes in a few microseconds)."""
    tiles = tiles or geometry.decoding_tiles(d, rows)
    defines = KERNEL.defines(d, dtype, tiles)
    smem = KERNEL.smem(d, tiles)
    return source.function(KERNEL, defines, smem), source.function(COMBINE, defines), tiles, smem


@functools.cache
def _hardware(device_id: int) -> hardware.Hardware:
    """The simulator's preset for this GPU (the default preset for one it has none of)."""
    return device.preset_for(device.properties()["name"]) or hardware.get(hardware.DEFAULT)


@functools.lru_cache(maxsize=256)
def _best_splits(groups: int, rows: int, nk: int, d: int, s: int, preset: str) -> int:
    """sim.decode's choice: best_splits for `groups` (sequence, K/V head) programs of `rows` packed query rows."""
    return best_splits(groups, 1, rows, nk, d, s, hardware.get(preset))
