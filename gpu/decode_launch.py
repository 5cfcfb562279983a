"""Rung 8's launch machinery (gpu.decoding calls it): the split kernel's builds, how its fused combine merges a
group's partials, its parameters packed for the driver, and the per-stream workspaces of the partials.

The merge (gpu/NOTES.md runs 39-dec4, 41-dec6, 43-dec8): "cluster", the group's split blocks launched as one thread
block cluster (short splits; a paged cache's where the grid is one block an SM); "spread", all the group's blocks of a
grid launched with cuLaunchCooperativeKernel, which refuses a grid that is not resident at once, so that the blocks
can wait for each other and each merge a share; "ticket", the last block of the group to finish merges it alone.
"""

import collections
import ctypes
import functools
import math
import struct
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gpu import captured, device, geometry, pages, registry, source

KERNEL = registry.DECODE[8]
COMBINE = registry.HELPERS["decode_combine"]
MAX_CLUSTER, CLUSTER_KEYS = 16, 1024  # 2 … 16 splits of ≤ 1024 keys: a cluster a group (runs 39-dec4, 43-dec8)
MERGES = ("cluster", "spread", "ticket")
NULL = np.uintp(0)  # a null pointer argument: a contiguous cache has no block table
ARGS = 21  # the split kernel's parameters
COMBINE_ROWS = 8  # rows of O per combine thread block (COMBINE_ROWS in the kernel)
WORKSPACES = 8  # (stream, shape) workspaces kept; the least recently used goes back to CuPy's pool (gpu.captured)


@functools.lru_cache(maxsize=64)
def scalars(nq, g, nk, page_size, max_pages, num_pages, splits, scale, causal) -> tuple:
    """The split kernel's scalar arguments as the 32-bit patterns it takes (int, and the float τ·log2 e), made once
    per distinct set."""
    (scale_bits,) = struct.unpack("<I", struct.pack("<f", scale * math.log2(math.e)))
    return nq, g, nk, page_size, max_pages, num_pages, splits, scale_bits, int(causal)


def launch_kernel(cupy, kernel, grid, threads: int, smem: int, values: tuple, cooperative: bool = False) -> None:
    """cuLaunchKernel (cooperative: cuLaunchCooperativeKernel, which refuses a grid that cannot be resident at once)
    of `kernel` on the current stream, its ARGS parameters (pointers, and 32-bit values in the low half) packed by
    ctypes into this thread's buffer, which the driver copies at the launch: 5.2 µs of host time where CuPy's call,
    which converts each argument, took 9.2 (gpu/NOTES.md run 37-dec3)."""
    driver, stream = cupy.cuda.driver, cupy.cuda.get_current_stream().ptr
    queue = driver.launchCooperativeKernel if cooperative else driver.launchKernel
    _queue(queue, (kernel.kernel.ptr, *grid, threads, 1, 1, smem, stream), values, () if cooperative else (0,))


def _queue(queue, head: tuple, values: tuple, tail: tuple) -> None:
    """queue(*head, the parameter buffer, *tail), `values` packed into this thread's buffer first."""
    buffer = getattr(_params, "buffer", None)
    if buffer is None:
        slots = (ctypes.c_uint64 * ARGS)()
        pointers = (ctypes.c_void_p * ARGS)(*(ctypes.addressof(slots) + 8 * i for i in range(ARGS)))
        buffer = _params.buffer = (slots, pointers, ctypes.addressof(pointers))
    buffer[0][:] = values
    queue(*head, buffer[2], *tail)


_params = threading.local()  # each thread's parameter buffer for launch_kernel


class Shape(NamedTuple):
    """What a decode launch is planned from: gpu.decoding's Plan less its arrays, with q's dtype and the block
    table's pages per sequence (0: a contiguous cache)."""

    batch: int
    hkv: int
    g: int
    nq: int
    d: int
    nk: int
    page_size: int
    num_pages: int
    splits: int
    scale: float
    causal: bool
    dtype: str
    max_pages: int


@dataclass(frozen=True, slots=True)
class Launch:
    """One decode launch worked out ahead (`plan`) for a shape and stream: the driver's queue call and its leading
    arguments (function, grid, threads, shared memory, stream), the kernel's parameters that are the same every call
    (the partials' and tickets' pointers, the error report's, the scalars), the workspace it holds, and the separate
    combine (gpu.lab's fused=False): a call allocates o (and lse), reads the arrays' addresses and queues."""

    queue: object  # cupy.cuda.driver.launchKernel or launchCooperativeKernel
    head: tuple  # (function, grid x y z, threads 1 1, shared memory, stream)
    tail: tuple  # launchKernel's extra (none): (0,); cooperative: ()
    parts: tuple | None  # (O_parts, lse_parts) pointers; None with one split, where o and lse take their place
    rest: tuple  # tickets (0: none), error flags, claim, then `scalars`
    scratch: object  # the lse written where the caller asks for none
    separate: tuple | None  # (combine kernel, grid, block, its last arguments converted once), or None
    workspace: tuple  # (O_parts, lse_parts, tickets): held while the plan is

    def __call__(self, cupy, q, k, v, table, seqlens, lse: bool):
        """(o, lse or None): o freshly allocated, lse too where asked (else the scratch is written)."""
        o = cupy.empty(q.shape, q.dtype)
        L = cupy.empty(q.shape[:3], cupy.float32) if lse else self.scratch
        out = (o.data.ptr, L.data.ptr)
        paging = (0, 0) if table is None else (table.data.ptr, seqlens.data.ptr)
        values = (q.data.ptr, k.data.ptr, v.data.ptr, *paging, *out, *(self.parts or out), *self.rest)
        _queue(self.queue, self.head, values, self.tail)
        if self.separate is not None:
            combine, grid, block, last = self.separate
            combine(grid, block, (*self.workspace[:2], NULL if seqlens is None else seqlens, o, L, *last))
        return o, (L if lse else None)


@functools.lru_cache(maxsize=256)
def plan(s: Shape, tiles, fused: bool, merge: str | None, device_id: int, stream: int, own: bool = False) -> Launch:
    """The Launch of a call of shape `s` on `stream` (the current one, of device `device_id`): the split kernel with
    the combine fused (`merge`, None: `merge_for`'s choice — a cluster of the group's blocks, all the group's blocks
    of a cooperative grid, or the last block to finish), or (fused=False) then the combine kernel; the partials in
    the stream's workspace, or (`own`: a CUDA graph's capture, gpu.captured) in a workspace of its own. `tiles`
    overrides the geometry, `fused` and `merge` the combine (gpu.lab)."""
    cupy = device.require()
    rows, groups = s.batch * s.hkv * s.g * s.nq, s.batch * s.hkv
    parts, lse_parts, tickets, scratch = (new_workspace if own else workspace)(cupy, s.splits, rows, s.d, groups)
    asked, merge = merge, None
    if fused and s.splits > 1:
        merge = asked or merge_for(device_id, s.d, s.dtype, s.g * s.nq, tiles, s.splits, groups, s.nk, s.page_size)
    cluster = s.splits if merge == "cluster" else 1  # the kernel ignores tickets then
    split, combine, tiles, smem = kernels(s.d, s.dtype, s.g * s.nq, tiles, cluster, merge == "spread", s.page_size)
    if asked is not None and merge is not None:  # gpu.lab's choice (a cluster at any split length): one it can take
        can = {"ticket": True, "cluster": 1 < s.splits <= MAX_CLUSTER,
               "spread": s.splits * groups <= resident(split, tiles.threads, smem) * sm_count(device_id)}  # fmt: skip
        if not can.get(merge):
            raise ValueError(f"merge: {merge!r} is not one of {MERGES} that this call can take")
    _, errors, claim = pages.errors(device_id)
    one = s.splits == 1
    rest = (0 if one or not fused else tickets.data.ptr, int(errors), claim.data.ptr,
            *scalars(s.nq, s.g, s.nk, s.page_size, s.max_pages, s.num_pages, s.splits, s.scale, s.causal))  # fmt: skip
    separate = None
    if not one and not fused:
        last = (rows, s.hkv * s.g * s.nq, s.splits, s.page_size, s.max_pages)
        separate = (combine, (-(-rows // COMBINE_ROWS),), (32 * COMBINE_ROWS, 1, 1),
                    tuple(source.by_value(np.int32(x)) for x in last))  # fmt: skip
    cooperative = merge == "spread"
    driver = cupy.cuda.driver
    return Launch(driver.launchCooperativeKernel if cooperative else driver.launchKernel,
                  (split.kernel.ptr, s.splits, s.hkv, s.batch, tiles.threads, 1, 1, smem, stream),
                  () if cooperative else (0,), None if one else (parts.data.ptr, lse_parts.data.ptr), rest, scratch,
                  separate, (parts, lse_parts, tickets))  # fmt: skip


_workspaces = collections.OrderedDict()


def workspace(cupy, splits: int, rows: int, d: int, groups: int):
    """(O_parts (splits, rows, d) float32, lse_parts (splits, rows) float32, tickets (groups,) int32 zero, an lse
    (rows,) float32 that no caller reads) for the current stream, the first three None with one split: kernels on
    one stream run in order, so one call's partials are consumed before the next call's are written, and the fused
    combine sets each ticket back to zero."""
    stream = cupy.cuda.get_current_stream()
    key = (cupy.cuda.Device().id, stream.ptr, splits, rows, d, groups)
    found = _workspaces.pop(key, None)
    if found is None:
        found = new_workspace(cupy, splits, rows, d, groups)
        if len(_workspaces) >= WORKSPACES:
            _workspaces.popitem(last=False)
    _workspaces[key] = found
    return found


def new_workspace(cupy, splits: int, rows: int, d: int, groups: int):
    """`workspace`'s arrays, freshly allocated on the current stream (the tickets zeroed there)."""
    scratch = cupy.empty((rows,), cupy.float32)
    if splits == 1:
        return None, None, None, scratch
    return (cupy.empty((splits, rows, d), cupy.float32), cupy.empty((splits, rows), cupy.float32),
            cupy.zeros((groups,), cupy.int32), scratch)  # fmt: skip


def clustered(splits: int, nk: int, page_size: int, blocks_per_sm: float) -> bool:
    """A cluster merges: 2 … MAX_CLUSTER splits of ≤ CLUSTER_KEYS keys (run 39-dec4). Contiguous (page_size 0):
    ⌈nk / splits⌉ keys the longest; paged: ⌈pages / min(splits, pages)⌉ whole pages the longest, pages = ⌈nk /
    page_size⌉ (nk: the block table's capacity, or the longest sequence), as the kernel deals them, and only where the
    grid is at most one block an SM (`blocks_per_sm` = splits · groups / SMs): at B 4 Nk 4K (8 splits of 2 pages, two
    blocks an SM) clusters took 49.5 µs a step against the spread merge's 31.0 (run 42-dec7)."""
    if not 1 < splits <= MAX_CLUSTER:
        return False
    if not page_size:
        return nk <= CLUSTER_KEYS * splits
    pages = -(-nk // page_size)
    return blocks_per_sm <= 1 and -(-pages // min(splits, pages)) * page_size <= CLUSTER_KEYS


@functools.lru_cache(maxsize=256)
def merge_for(device_id: int, d: int, dtype: str, rows: int, tiles, splits: int, groups: int, nk: int, page_size: int):
    """How the fused combine merges `splits` > 1 partials of `groups` (sequence, K/V head) groups: "cluster" where a
    cluster can (`clustered`), else "spread" where the whole grid of splits × groups blocks is resident at once (the
    cooperative launch's condition, from the driver's occupancy of the spread build), else "ticket"."""
    if clustered(splits, nk, page_size, splits * groups / sm_count(device_id)):
        return "cluster"
    split, _, tiles, smem = kernels(d, dtype, rows, tiles, 1, True, page_size)
    return "spread" if splits * groups <= resident(split, tiles.threads, smem) * sm_count(device_id) else "ticket"


def resident(kernel, threads: int, smem: int) -> int:
    """Blocks of `kernel` an SM holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
    return _occupancy(kernel.kernel.ptr, threads, smem)


@functools.cache
def _occupancy(function: int, threads: int, smem: int) -> int:
    blocks = ctypes.c_int(0)
    status = captured.libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks), ctypes.c_void_p(function), ctypes.c_int(threads), ctypes.c_size_t(smem)
    )
    if status != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed: CUresult {status}")
    return blocks.value


@functools.cache
def sm_count(device_id: int) -> int:
    return device.require().cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]


@functools.cache
def kernels(d: int, dtype: str, rows: int, tiles=None, cluster: int = 1, spread: bool = False, page_size: int = 0):
    """(split kernel, combine kernel, tiles, shared memory) for head dim d, `rows` packed query rows, `cluster`
    split blocks a cluster (1: none), `spread` (the merge shared by a cooperative grid's blocks) and the cache's
    page_size (0: contiguous; one not a multiple of the tile's keys takes the build whose rows look their pages up,
    PAGE_ROWS), cached: a decode step's host time is mostly Python."""
    tiles = tiles or geometry.decoding_tiles(d, rows)
    defines = KERNEL.defines(d, dtype, tiles) | {"CLUSTER": cluster, "SPREAD": int(spread),
                                                 "PAGE_ROWS": int(page_size % tiles.block_cols != 0)}  # fmt: skip
    smem = KERNEL.smem(d, tiles)
    split = source.function(KERNEL, defines, smem)
    if cluster > 8:  # past CUDA's portable cluster size: CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (14)
        device.require().cuda.driver.funcSetAttribute(split.kernel.ptr, 14, 1)
    return split, source.function(COMBINE, defines), tiles, smem
