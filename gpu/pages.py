"""The paged cache's block_table and cache_seqlens for `gpu.decode`: checked on the host where they are NumPy arrays
(sim.api.paged's rules, before any launch), or, CuPy arrays, their shapes here and their values by rung 8's kernel,
which reports the first refused entry into pinned host memory (read here without a synchronization)."""

import functools

import numpy as np

from gpu import device
from sim.core.errors import InputError

ERRORS = 6  # the kernel's ERRORS: code, sequence, entry, value, num_pages, keys per sequence
INT32_MAX = 2**31 - 1


def check_page_shapes(block_table, cache_seqlens, batch: int) -> None:
    """block_table (B, pages per sequence) and cache_seqlens (B,) of integers: what can be checked without reading
    their values (those the kernel checks)."""
    table, seqlens = block_table, cache_seqlens
    if table.ndim != 2 or table.shape[0] != batch or table.dtype.kind not in "iu" or table.shape[1] < 1:
        raise InputError(
            f"block_table: must be integers shaped ({batch}, pages per sequence), got {table.dtype} {table.shape}"
        )
    if seqlens.shape != (batch,) or seqlens.dtype.kind not in "iu":
        raise InputError(
            f"cache_seqlens: must be {batch} integers (one per sequence), got {seqlens.dtype} {seqlens.shape}"
        )


def check_pages(block_table, cache_seqlens, batch: int, num_pages: int, page_size: int):
    """(block_table, cache_seqlens) as int32 host arrays: cache_seqlens (B,) in 1 … pages per sequence × page_size,
    block_table (B, pages per sequence), every entry a sequence uses in 0 … num_pages − 1 (sim.api.paged's rules)."""
    if block_table is None or cache_seqlens is None:
        missing = "block_table" if block_table is None else "cache_seqlens"
        raise InputError(f"{missing}: a paged cache needs both block_table and cache_seqlens")
    table, seqlens = host(block_table), host(cache_seqlens)
    check_page_shapes(table, seqlens, batch)
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


def on_gpu(x) -> bool:
    return type(x).__module__.startswith("cupy")


def as_int32(cupy, x):
    """x as a C-contiguous int32 CuPy array: itself, or (one launch) a copy with values clipped to −1 … 2³¹ − 1, so
    that a value outside int32 stays outside the range the kernel accepts instead of wrapping into it."""
    if x.dtype == np.int32 and x.flags.c_contiguous:
        return x
    return cupy.ascontiguousarray(cupy.clip(x, -1, INT32_MAX).astype(cupy.int32))


def raise_reported(cupy, device_id: int, *, sync: bool) -> None:
    """Raise the entry a kernel on this device refused (gpu.decoding's docstring), and clear the report. Without
    `sync`, a report already written is raised (reading pinned memory costs no synchronization); with it, every
    kernel queued on the device finishes first."""
    flags, _, claim = errors(device_id)
    if sync:
        cupy.cuda.Device(device_id).synchronize()
    if flags[0] == 0:
        return
    code, b, j, value, num_pages, capacity = (int(x) for x in flags)  # the kernel writes the code last
    with cupy.cuda.Device(device_id):
        cupy.cuda.Device(device_id).synchronize()  # no kernel still reporting (it could claim after the reset)
        claim.fill(0)
        cupy.cuda.Device(device_id).synchronize()
    flags[:] = 0
    if code == 1:
        raise InputError(f"block_table: entry [{b}, {j}] = {value} points past the cache's {num_pages} pages; choose "
                         f"0 … {num_pages - 1} (found on the GPU by a decode call: that sequence's rows are NaN)")  # fmt: skip
    raise InputError(f"cache_seqlens: sequence {b} has {value} keys; choose 1 … {capacity} (the block_table's keys per "
                     f"sequence; found on the GPU by a decode call: that sequence's rows are NaN)")  # fmt: skip


@functools.cache
def errors(device_id: int):
    """(flags, pointer, claim): ERRORS int32 of pinned host memory that the kernels of this device report into, zeroed
    (with unified addressing a kernel writes them through the host pointer itself), and the int32 on the device that
    the first reporter takes with an atomic."""
    cupy = device.require()
    memory = cupy.cuda.alloc_pinned_memory(4 * ERRORS)
    flags = np.frombuffer(memory, np.int32, ERRORS)
    flags[:] = 0
    _errors_memory.append(memory)  # kept for the life of the process
    with cupy.cuda.Device(device_id):
        claim = cupy.zeros((1,), cupy.int32)
    return flags, np.uintp(memory.ptr), claim


_errors_memory = []


def host(x) -> np.ndarray:
    """A NumPy copy of an integer argument given as NumPy, CuPy (one device-to-host copy) or a list."""
    return x.get() if type(x).__module__.startswith("cupy") else np.asarray(x)
