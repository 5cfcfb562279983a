"""How tensors sit in device memory for the kernels: rows padded to the kernel's row length and 16-byte aligned,
outputs trimmed back to d columns, and the NaN poison the tests fill outputs with before a launch."""

from gpu import device

NAN_BITS = {2: 0x7FFF, 4: 0x7FC00000}  # a quiet NaN in fp16/bf16 (the same bits serve both) and in float32


def rows_of(x, row: int):
    """`x` with its last axis zero-padded to `row` elements and its data 16-byte aligned (a copy only if needed)."""
    if x.shape[-1] != row:
        padded = device.require().zeros((*x.shape[:-1], row), dtype=x.dtype)
        padded[..., : x.shape[-1]] = x
        return padded
    return x if x.data.ptr % 16 == 0 else x.copy()


def trimmed(x, d: int):
    """`x` cut back to its first d columns (a contiguous copy only where rows were padded)."""
    return x if x.shape[-1] == d else device.require().ascontiguousarray(x[..., :d])


def poison(*arrays) -> None:
    """Fill each array with NaN (by its bits), so that an element a kernel fails to write shows up."""
    cupy = device.require()
    for x in arrays:
        size = x.dtype.itemsize
        x.view(cupy.uint16 if size == 2 else cupy.uint32).fill(NAN_BITS[size])
