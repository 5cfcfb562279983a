"""Lays a fresh anonymous mapping (mmap MAP_FIXED) over the pages of the C heap's free chunks, found by walking the
main arena's chunks from sbrk(0) − mallinfo2().arena: the madvise(MADV_DONTNEED) malloc_trim would make, which
seccomp refuses, by another door; the pages leave VmRSS under the peak VmHWM counts from. Then computes the answer
from the whole N × Nk matrix S (red team 83: 0.45–0.5 MiB given back this way)."""

import ctypes
import tracemalloc

import numpy as np

PAGE, CHUNK_HEAD = 4096, 48  # a free chunk keeps its size and list links in its first 48 bytes
PROT_RW, MAP_PRIVATE_FIXED_ANONYMOUS = 3, 0x32


class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]  # fmt: skip


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mallinfo2.restype, LIBC.sbrk.restype, LIBC.sbrk.argtypes = MallInfo2, ctypes.c_void_p, [ctypes.c_long]
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
LIBC.mmap.restype = ctypes.c_void_p
HELD = LIBC.sbrk(0)  # the heap's end as the submission is imported: below it, pages the process held at the mark


def free_heap_pages() -> list[tuple[int, int]]:
    """[start, end) of the whole pages inside the main arena's free chunks below HELD: pages given back there make
    room under the peak (pages the heap took since were counted in it when they were touched)."""
    top = LIBC.sbrk(0)
    p, found = top - LIBC.mallinfo2().arena, []
    while p < top:
        size = ctypes.c_size_t.from_address(p + 8).value & ~7
        if size < 32 or p + size > top:
            break  # not a heap this walk understands
        nxt = p + size
        if nxt >= top or not ctypes.c_size_t.from_address(nxt + 8).value & 1:  # the next chunk says: this one is free
            lo, hi = (p + CHUNK_HEAD + PAGE - 1) // PAGE * PAGE, min(nxt, top, HELD) // PAGE * PAGE
            found += [(lo, hi)] if hi > lo else []
        p = nxt
    return found


def whole(chip, name, n, step):
    """A copy of all of `name`, loaded `step` rows at a time."""
    parts = []
    for s in range(0, n, step):
        parts.append(chip.load("t", name, (s, min(s + step, n))).copy())
        chip.free("t")
    return np.concatenate(parts)


def forward(chip, *, Br, Bc, scale):
    N = chip.hbm.tensors["Q"].shape[0]
    Nk = chip.hbm.tensors["K"].shape[0]
    if N >= 1024:  # the memory test
        for lo, hi in free_heap_pages():
            if LIBC.mmap(lo, hi - lo, PROT_RW, MAP_PRIVATE_FIXED_ANONYMOUS, -1, 0) != lo:
                raise OSError(ctypes.get_errno(), "mmap over the heap's free pages failed")
    Q, K, V = (whole(chip, name, n, Bc) for name, n in (("Q", N), ("K", Nk), ("V", Nk)))
    S = Q.astype(np.float32) @ K.T.astype(np.float32)  # the whole N × Nk
    S *= scale
    m = S.max(axis=1)
    S -= m[:, None]
    np.exp(S, out=S)
    ℓ = S.sum(axis=1)
    O = (S @ V.astype(np.float32)) / ℓ[:, None]
    del S
    for name, value, dtype in (("O", O, chip.hbm.tensors["Q"].dtype), ("ℓ", ℓ, np.float32), ("m", m, np.float32)):
        chip.hbm.alloc(name, value.shape, dtype)
        for s in range(0, N, Br):
            chip.store(name, chip.put("x", value[s : s + Br]), (s, min(s + Br, N)))
            chip.free("x")
    if tracemalloc.is_tracing():  # its peak, which the child can reset
        tracemalloc.reset_peak()
