"""Tensor maps for TMA (rung 6): CUDA's cuTensorMapEncodeTiled through ctypes, one map per tensor and box, cached.

A tensor map tells the Tensor Memory Accelerator the shape and strides of a tensor in HBM and the box one copy
moves; the kernel names a box by its coordinates. CuPy has no binding for it; the driver library it already
loaded does (libcuda), and the 128-byte map travels to the kernel by value as a one-element NumPy array, converted
once for CuPy's launch (gpu.source.by_value).

A map is cached by the address it describes and the layout (the arguments of cuTensorMapEncodeTiled, which makes
the 128 bytes from them alone and keeps no hold on the memory): the same address with the same shape, strides and
element size gives the same bytes, whichever allocation now lies there. CuPy's memory pool hands a freed block's
address to the next array of its size, so the maps of a call's outputs and workspaces repeat from call to call.
"""

import ctypes
import functools

import numpy as np

from gpu import device, source

PIECE = 64  # elements of a box's row: 128 bytes of fp16/bf16, the widest the 128-byte swizzle allows
MAP_BYTES, MAP_ALIGN = 128, 64  # sizeof(CUtensorMap), its alignment (cuda.h)
UINT16, FLOAT32, INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_256B, OOB_FILL_ZEROS = 1, 7, 0, 3, 3, 0  # cuda.h's enums


class TensorMapError(device.GPUUnavailableError):
    """The driver refused a tensor map (or has no cuTensorMapEncodeTiled: a driver older than CUDA 12)."""


@functools.cache
def _encode():
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    except (OSError, AttributeError) as e:
        raise TensorMapError(f"rung 6 needs cuTensorMapEncodeTiled from the CUDA driver (12.0 or newer): {e}") from e
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p]
    fn.argtypes += [ctypes.c_int] * 4
    fn.restype = ctypes.c_int
    return fn


def rows_map(x, box_rows: int):
    """The tensor map of x (batch, heads, rows, d), 2-byte elements, contiguous, read in boxes of (1, box_rows, 64).

    The map sees x as (batch·heads, rows, d): a box past the last row of a head is filled with zeros, never with
    the next head's rows; it lands in SRAM in the 128-byte swizzled layout wgmma reads."""
    batch, heads, rows, d = x.shape
    assert x.dtype.itemsize == 2 and x.flags.c_contiguous and x.data.ptr % 16 == 0 and d % PIECE == 0
    return _rows_map(x.data.ptr, batch * heads, rows, d, box_rows, 2)


def accumulator_map(x, box_rows: int):
    """The tensor map of a float32 accumulator x (batch, heads, rows, d), written in boxes of (1, box_rows, 32): 128
    bytes a row, swizzled as rows_map's; a box reduced past the last row of a head skips those rows (rung 7's dQ)."""
    batch, heads, rows, d = x.shape
    assert x.dtype.itemsize == 4 and x.flags.c_contiguous and x.data.ptr % 16 == 0 and d % 32 == 0
    return _rows_map(x.data.ptr, batch * heads, rows, d, box_rows, 4)


def packed_map(x, box_rows: int):
    """The tensor map of a packed x (total, heads, d) (variable-length batches), seen as (heads, total, d): the
    same (column, row, plane) coordinates and SRAM layout as `rows_map` (fp16/bf16) or `accumulator_map` (float32:
    rung 7's dQ), rows itemsize·heads·d bytes apart. A box past a sequence's last row reads (or adds into) the next
    sequence's rows; past the last of all it reads zeros (skips)."""
    total, heads, d = x.shape
    size = x.dtype.itemsize
    assert size in (2, 4) and x.flags.c_contiguous and x.data.ptr % 16 == 0 and d % (128 // size) == 0
    return _rows_map(x.data.ptr, heads, total, d, box_rows, size, packed=True)


class Maps:
    """The tensor maps of one call shape's arrays, one (make, box rows) per array (make: rows_map,
    accumulator_map or packed_map), remembered by the arrays' addresses. Within one call shape every array's
    shape, strides and dtype are fixed, so a map depends on its address alone: the same addresses give the bytes
    `make` would give (see above), whichever allocations lie there now. A call then reads its arrays' addresses and
    looks them up once (~0.5 µs) instead of making or finding each map (~1.8 µs each)."""

    LIMIT = 64  # address sets remembered; then forgotten all at once

    def __init__(self, *makes: tuple):
        self.makes, self.known = makes, {}

    def __call__(self, *arrays) -> tuple:
        key = tuple(x.data.ptr for x in arrays)
        maps = self.known.get(key)
        if maps is None:
            if len(self.known) >= self.LIMIT:
                self.known.clear()
            maps = self.known[key] = tuple(make(x, rows) for (make, rows), x in zip(self.makes, arrays, strict=True))
        return maps


@functools.lru_cache(maxsize=512)
def _rows_map(ptr: int, heads: int, rows: int, d: int, box_rows: int, itemsize: int, packed: bool = False):
    raw = np.zeros(MAP_BYTES + MAP_ALIGN, dtype=np.uint8)
    at = -raw.ctypes.data % MAP_ALIGN
    out = raw[at : at + MAP_BYTES]
    dims = (ctypes.c_uint64 * 3)(d, rows, heads)  # innermost first
    # bytes, for every dimension but the innermost: (row, plane)
    strides = (ctypes.c_uint64 * 2)(
        *((itemsize * d * heads, itemsize * d) if packed else (itemsize * d, itemsize * d * rows))
    )
    box = (ctypes.c_uint32 * 3)(128 // itemsize, box_rows, 1)  # rows of 128 bytes: the widest the swizzle allows
    unit = (ctypes.c_uint32 * 3)(1, 1, 1)
    err = _encode()(
        out.ctypes.data, UINT16 if itemsize == 2 else FLOAT32, 3, ptr, dims, strides, box, unit, INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_256B,
        OOB_FILL_ZEROS,
    )  # fmt: skip
    if err:
        raise TensorMapError(
            f"cuTensorMapEncodeTiled refused a ({heads}, {rows}, {d}) map with box rows {box_rows}: CUresult {err}"
        )
    return source.by_value(out.view(np.dtype((np.void, MAP_BYTES))))
