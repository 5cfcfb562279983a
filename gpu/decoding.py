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

Host cost per call: a call whose arrays are all CuPy arrays and whose options are of the exact types a valid call
passes is checked once per key (`prepare`: each array's shape, strides, dtype and device, causal, scale, splits)
and its launch planned once per key and stream (gpu.decode_launch.plan: the build, grid, merge, the workspace of
the partials and tickets, the parameters that do not change); a later call of that key allocates o (and lse with
return_lse), reads its arrays' addresses and queues one launch through the driver (cuLaunchKernel, its parameters
packed by ctypes). The paged arrays' values are the kernel's to check, every call; a NumPy block table is checked
on the host every call (its values are in no key). On H100 hosts: ~23–32 µs a call where it was ~29–46
(×1.2–1.7), of which the allocation of o and the driver's launch are ~9–11 (gpu/NOTES.md run 41-dechost14). A call made
while its stream captures a CUDA graph takes a Launch of that capture's own instead, its workspace never in the
workspaces kept a stream (gpu.captured).
"""

import functools
import math
from dataclasses import dataclass

import numpy as np

from gpu import captured, decode_launch, device, dtypes, geometry, inputs, pages, registry
from gpu.registry import HALF
from sim.core.errors import InputError
from sim.machine import hardware
from sim.machine.occupancy import best_splits

KERNEL = registry.DECODE[8]
MAX_SPLITS = 128  # the combine's MAX_SPLITS (and best_splits' default cap)
CHECKED = 64  # checked keys kept; then forgotten all at once (inputs.remember)
STREAMS = 16  # launch plans kept a key, one a stream
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

    def shape(self) -> decode_launch.Shape:
        """What its launch is planned from."""
        return decode_launch.Shape(self.batch, self.hkv, self.g, self.nq, self.d, self.nk, self.page_size,
                                   self.num_pages, self.splits, self.scale, self.causal, dtypes.name(self.q.dtype),
                                   0 if self.table is None else self.table.shape[1])  # fmt: skip


@dataclass(slots=True)
class Checked:
    """What every call of one key shares: its Plan's sizes (`static`), whether the paged arrays go to the kernel as
    given (int32, C-contiguous: the key holds the dtypes and strides that say so), and its launch plans by stream."""

    static: tuple
    direct: bool
    shape: decode_launch.Shape
    launches: dict


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
    plan, checked = _checked_call(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits)
    device_id = q.device.id
    with q.device:
        pages.raise_reported(cupy, device_id, sync=False)
        stream = cupy.cuda.get_current_stream().ptr
        if captured.capturing(cupy, stream):  # a graph's: a Launch of its own (gpu.captured)
            step = captured.plan(cupy, stream, decode_launch.plan.__wrapped__, plan.shape(), None, True, None,
                                 device_id, stream, True)  # fmt: skip
            captured.hold(plan.table, plan.seqlens)
        elif checked is None:
            step = decode_launch.plan(plan.shape(), None, True, None, device_id, stream)
        else:
            step = checked.launches.get(stream)
            if step is None:
                step = decode_launch.plan(checked.shape, None, True, None, device_id, stream)
                inputs.remember(checked.launches, stream, step, STREAMS)
        o, lse = step(cupy, q, k, v, plan.table, plan.seqlens, return_lse)
        if check:
            pages.raise_reported(cupy, device_id, sync=True)
    return (o, lse) if return_lse else o


def decode_errors() -> None:
    """Wait for the current GPU and raise (one-line InputError) the first block_table or cache_seqlens entry a decode
    kernel refused since the last report; nothing if none did."""
    cupy = device.require()
    pages.raise_reported(cupy, cupy.cuda.Device().id, sync=True)


def prepare(q, k, v, block_table, cache_seqlens, causal, scale, splits) -> Plan:
    """Every argument checked (one-line InputError naming it) and the number of splits chosen. What the checks read
    (`_key`) keys a cache of their outcome, so that a decode step with the arguments of the step before costs a
    lookup, not the checks (a NumPy block table's values are checked on every call)."""
    return _checked_call(device.require(), q, k, v, block_table, cache_seqlens, causal, scale, splits)[0]


def _checked_call(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits) -> tuple:
    """(Plan, its key's Checked entry, or None where the call has no key)."""
    key = _key(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits)
    checked = _checked.get(key) if key is not None else None
    if checked is None:
        plan = _prepare(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits)
        if key is None:
            return plan, None
        static = (plan.batch, plan.hkv, plan.g, plan.nq, plan.d, plan.nk, plan.page_size, plan.num_pages,
                  plan.splits, plan.scale, plan.causal)  # fmt: skip
        direct = plan.table is block_table and plan.seqlens is cache_seqlens
        checked = Checked(static, direct, plan.shape(), {})
        inputs.remember(_checked, key, checked, CHECKED)
        return plan, checked
    if block_table is None or checked.direct:
        return Plan(q, k, v, block_table, cache_seqlens, *checked.static), checked
    table, seqlens = pages.as_int32(cupy, block_table), pages.as_int32(cupy, cache_seqlens)  # values: every call
    return Plan(q, k, v, table, seqlens, *checked.static), checked


def _key(cupy, q, k, v, block_table, cache_seqlens, causal, scale, splits):
    """What prepare's checks read, hashable: inputs.signature of the arrays (shape, strides, dtype, device), and
    causal, scale, splits where each is of the exact type a valid call passes (a bool; None, an int or a float; None
    or an int); None where the checks read more (a block table on the host: its values) or an option is of another
    type (such a call is checked in full). A NaN scale never equals itself, so never finds a checked call."""
    paged = block_table is not None or cache_seqlens is not None
    arrays = inputs.signature(*((q, k, v, block_table, cache_seqlens) if paged else (q, k, v)))
    if arrays is None or type(causal) is not bool or (splits is not None and type(splits) is not int):
        return None
    if scale is not None and type(scale) not in (int, float):
        return None
    return arrays, causal, scale, splits


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
        splits = _best_splits(batch * hkv, g * nq, nk, d, q.dtype.itemsize, hw.name, page_size)
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
    written into the workspace. `tiles` overrides the geometry, `fused` and `merge` the combine (gpu.lab). Planned
    once per shape and stream (gpu.decode_launch.plan; while the stream captures a graph, once per capture:
    gpu.captured)."""
    stream = cupy.cuda.get_current_stream().ptr
    if captured.capturing(cupy, stream):
        step = captured.plan(cupy, stream, decode_launch.plan.__wrapped__, p.shape(), tiles, fused, merge,
                             p.q.device.id, stream, True)  # fmt: skip
    else:
        step = decode_launch.plan(p.shape(), tiles, fused, merge, p.q.device.id, stream)
    return step(cupy, p.q, p.k, p.v, p.table, p.seqlens, lse)


_checked = {}  # _key → Checked


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
def _best_splits(groups: int, rows: int, nk: int, d: int, s: int, preset: str, page_size: int) -> int:
    """sim.decode's choice: best_splits for `groups` (sequence, K/V head) programs of `rows` packed query rows (a
    paged cache, page_size > 0: sim.machine.occupancy's paged rule, at most ⌈nk / page_size⌉ splits)."""
    return best_splits(groups, 1, rows, nk, d, s, hardware.get(preset), page_size=page_size)
