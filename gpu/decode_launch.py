"""Rung 8's launch machinery (gpu.decoding calls it): the split kernel's builds, how its fused combine merges a
group's partials, its parameters packed for the driver, and the per-stream workspaces of the partials.

The merge (gpu/NOTES.md runs 39-dec4, 41-dec6): "cluster", the group's split blocks launched as one thread block
cluster (a contiguous cache's short splits); "spread", all the group's blocks of a grid launched with
cuLaunchCooperativeKernel, which refuses a grid that is not resident at once, so that the blocks can wait for each
other and each merge a share; "ticket", the last block of the group to finish merges it alone.
"""

import collections
import ctypes
import functools
import math
import struct
import threading

import numpy as np

from gpu import device, geometry, registry, source

KERNEL = registry.DECODE[8]
COMBINE = registry.HELPERS["decode_combine"]
MAX_CLUSTER, CLUSTER_KEYS = 16, 1024  # 2 … 16 splits of ≤ 1024 keys (contiguous): a cluster a group (run 39-dec4)
MERGES = ("cluster", "spread", "ticket")
NULL = np.uintp(0)  # a null pointer argument: a contiguous cache has no block table
ARGS = 21  # the split kernel's parameters
WORKSPACES = 8  # (stream, shape) workspaces kept; the least recently used goes back to CuPy's pool


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
    buffer = getattr(_params, "buffer", None)
    if buffer is None:
        slots = (ctypes.c_uint64 * ARGS)()
        pointers = (ctypes.c_void_p * ARGS)(*(ctypes.addressof(slots) + 8 * i for i in range(ARGS)))
        buffer = _params.buffer = (slots, pointers, ctypes.addressof(pointers))
    slots, _, address = buffer
    slots[:] = values
    stream = cupy.cuda.get_current_stream().ptr
    if cooperative:
        cupy.cuda.driver.launchCooperativeKernel(kernel.kernel.ptr, *grid, threads, 1, 1, smem, stream, address)
    else:
        cupy.cuda.driver.launchKernel(kernel.kernel.ptr, *grid, threads, 1, 1, smem, stream, address, 0)


_params = threading.local()  # each thread's parameter buffer for launch_kernel


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
        scratch = cupy.empty((rows,), cupy.float32)
        found = (None, None, None, scratch) if splits == 1 else (
            cupy.empty((splits, rows, d), cupy.float32), cupy.empty((splits, rows), cupy.float32),
            cupy.zeros((groups,), cupy.int32), scratch)  # fmt: skip
        if len(_workspaces) >= WORKSPACES:
            _workspaces.popitem(last=False)
    _workspaces[key] = found
    return found


def clustered(splits: int, paged: bool, nk: int) -> bool:
    """A cluster can merge: a contiguous cache of 2 … MAX_CLUSTER splits of ≤ CLUSTER_KEYS keys (run 39-dec4)."""
    return not paged and 1 < splits <= MAX_CLUSTER and nk <= CLUSTER_KEYS * splits


@functools.lru_cache(maxsize=256)
def merge_for(device_id: int, d: int, dtype: str, rows: int, tiles, splits: int, groups: int, paged: bool, nk: int):
    """How the fused combine merges `splits` > 1 partials of `groups` (sequence, K/V head) groups: "cluster" where a
    cluster can (`clustered`), else "spread" where the whole grid of splits × groups blocks is resident at once (the
    cooperative launch's condition, from the driver's occupancy of the spread build), else "ticket"."""
    if clustered(splits, paged, nk):
        return "cluster"
    split, _, tiles, smem = kernels(d, dtype, rows, tiles, 1, True)
    return "spread" if splits * groups <= resident(split, tiles.threads, smem) * sm_count(device_id) else "ticket"


def resident(kernel, threads: int, smem: int) -> int:
    """Blocks of `kernel` an SM holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
    return _occupancy(kernel.kernel.ptr, threads, smem)


@functools.cache
def _occupancy(function: int, threads: int, smem: int) -> int:
    blocks = ctypes.c_int(0)
    status = _libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks), ctypes.c_void_p(function), ctypes.c_int(threads), ctypes.c_size_t(smem)
    )
    if status != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed: CUresult {status}")
    return blocks.value


@functools.cache
def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


@functools.cache
def sm_count(device_id: int) -> int:
    return device.require().cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]


@functools.cache
def kernels(d: int, dtype: str, rows: int, tiles=None, cluster: int = 1, spread: bool = False):
    """(split kernel, combine kernel, tiles, shared memory) for head dim d, `rows` packed query rows, `cluster`
    split blocks a cluster (1: none) and `spread` (the merge shared by a cooperative grid's blocks), cached: a decode
    step's host time is mostly Python."""
    tiles = tiles or geometry.decoding_tiles(d, rows)
    defines = KERNEL.defines(d, dtype, tiles) | {"CLUSTER": cluster, "SPREAD": int(spread)}
    smem = KERNEL.smem(d, tiles)
    split = source.function(KERNEL, defines, smem)
    if cluster > 8:  # past CUDA's portable cluster size: CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (14)
        device.require().cuda.driver.funcSetAttribute(split.kernel.ptr, 14, 1)
    return split, source.function(COMBINE, defines), tiles, smem
