"""Shadow memory: the kernel is handed decoy buffers full of NaN; every load and store goes to the grader's copy.

An argument's `data_ptr()` is the address of its decoy, so the pointers a kernel computes are real
addresses; the recording hooks (`interpret`) translate each one to an element of the private copy
the decoy stands for, and refuse any address outside every argument before memory is touched.
Code that reads an argument on the host through its raw pointer sees NaN; what it writes there is lost.
Each decoy sits between two guard bands of NaN that belong to no argument, at least as large as the
decoy itself, so a block that runs past the end of one tensor faults instead of reading the next.
"""

import numpy as np


class MemoryFault(Exception):
    """A load or store the grader refused before touching memory: outside the arguments, or of the wrong type."""


GUARD_BYTES = 1 << 16


class Storage:
    """What the interpreter asks of an argument's storage: its address, a host copy (itself), a copy back (none)."""

    def __init__(self, buffer: "Buffer"):
        self.buffer = buffer

    def data_ptr(self) -> int:
        return self.buffer.data_ptr()

    def cpu(self) -> "Storage":
        return self

    def copy_(self, other) -> None:
        """The interpreter copies host storage back to the device: here both are the decoy, and it holds NaN."""


class Buffer:
    """One kernel argument: a NumPy decoy of NaN (what the kernel's pointer points at) and the private values."""

    def __init__(self, name: str, values: np.ndarray):
        self.name = name
        self.values = np.array(values, order="C")  # the grader's own copy, writable: HBM as the kernel sees it
        guard = max(GUARD_BYTES, self.values.nbytes)
        self._block = np.full(guard + self.values.nbytes + guard + 64, 0xFF, np.uint8)  # 0xFF…: NaN at every width
        start = guard + (-(self._block.ctypes.data + guard) % 64)  # 64-byte aligned, as a GPU allocation is
        self.decoy = self._block[start : start + self.values.nbytes].view(self.values.dtype).reshape(self.values.shape)
        self.dtype = self.values.dtype  # read by triton's mangle_type: *fp16, *bf16, *fp32

    def data_ptr(self) -> int:
        return self.decoy.ctypes.data

    @property
    def nbytes(self) -> int:
        return self.values.nbytes

    # the rest of what the interpreter's GridExecutor calls on a torch tensor
    def untyped_storage(self) -> Storage:
        return Storage(self)

    def storage_offset(self) -> int:
        return 0

    def size(self) -> tuple[int, ...]:
        return self.values.shape

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.values.itemsize for s in self.values.strides)

    def new_empty(self, *args, **kwargs) -> "Buffer":
        return self

    def set_(self, *args) -> "Buffer":
        return self


class Shadow:
    """The arguments of one launch, by address: where a pointer lands, and the element it means."""

    def __init__(self, buffers: list[Buffer]):
        self.buffers = sorted(buffers, key=lambda b: b.data_ptr())
        self.bases = np.array([b.data_ptr() for b in self.buffers], dtype=np.uint64)
        self.ends = self.bases + np.array([b.nbytes for b in self.buffers], dtype=np.uint64)

    def locate(self, addresses: np.ndarray, itemsize: int, what: str) -> tuple[np.ndarray, np.ndarray]:
        """Each address's buffer (index into self.buffers) and element; MemoryFault for one outside them all."""
        addresses = addresses.astype(np.uint64, copy=False)
        which = np.searchsorted(self.bases, addresses, side="right").astype(np.int64) - 1
        inside = which >= 0
        safe = np.where(inside, which, 0)
        inside &= addresses + np.uint64(itemsize) <= self.ends[safe]
        offset = addresses - self.bases[safe]
        inside &= offset % np.uint64(itemsize) == 0
        if not inside.all():
            raise MemoryFault(f"{what} {self._outside(int(addresses[np.argmin(inside)]), itemsize)}")
        if len(which) and which.min() != which.max():
            names = " and ".join(self.buffers[b].name for b in np.unique(which))
            raise MemoryFault(f"{what} reaches both {names}: one pointer block must stay inside one tensor")
        return which, (offset // np.uint64(itemsize)).astype(np.int64)

    def _outside(self, address: int, itemsize: int) -> str:
        """Where a bad address is, in words: past the end of a buffer, before the next one, or misaligned."""
        for b in self.buffers:
            start = b.data_ptr()
            if start <= address < start + b.nbytes:
                return f"reaches {b.name} at a byte offset that is not a whole {itemsize}-byte element"
        near = min(self.buffers, key=lambda b: min(abs(address - b.data_ptr()), abs(address - b.data_ptr() - b.nbytes)))
        index = (address - near.data_ptr()) // near.values.itemsize
        return f"reaches element {index:,} of {near.name}, which has {near.values.size:,} (mask what lies outside it)"

    def flat(self, index: int, dtype) -> np.ndarray:
        """Buffer `index`'s private values as a flat array of `dtype` (the interpreter's storage type)."""
        return self.buffers[index].values.reshape(-1).view(dtype)
