"""gpu.autograd's backward work arrays (no GPU needed): the arrays the kernels fill lie in one PyTorch allocation of
4-byte words, each at its own multiple of 128 bytes (TMA's reduce-adds need 16), none overlapping; the zeroed ones
come apart. Worked by hand against fakes of CuPy and PyTorch (run 40-tax2's first build shared one pointer: wrong
gradients). The views of one allocation's address are made once (autograd_plan.Backward.work)."""

import itertools
import types

import numpy as np
import pytest

from gpu import autograd_plan, backward, registry

BASE = 0x7F00_0000_0200  # where the fake allocator puts a tensor: 512-byte aligned, as PyTorch's caching allocator


class Pointer:
    """CuPy's MemoryPointer as _workspace uses it: .ptr, + (a new pointer) and += (this one moved)."""

    def __init__(self, owner, ptr):
        self.owner, self.ptr = owner, ptr

    def __add__(self, offset):
        return Pointer(self.owner, self.ptr + offset)

    def __iadd__(self, offset):
        self.ptr += offset
        return self


class Array:
    def __init__(self, shape, dtype, memptr):
        self.shape, self.dtype, self.data = tuple(shape), np.dtype(dtype), memptr


class Tensor:
    def __init__(self, shape, dtype, zeroed, ptr):
        self.shape, self.dtype, self.zeroed, self.ptr = tuple(shape), dtype, zeroed, ptr

    def data_ptr(self):
        return self.ptr

    def get_device(self):
        return 0


class FakeTorch:
    float32, int32 = np.dtype("float32"), np.dtype("int32")

    def __init__(self):
        self.made, self.at = [], BASE

    def free_all(self):  # a caching allocator handing the same addresses to the next step
        self.made, self.at = [], BASE

    def _make(self, shape, dtype, zeroed):
        shape = (shape,) if isinstance(shape, int) else shape
        t = Tensor(shape, dtype, zeroed, self.at)
        self.at += -(-int(np.prod(shape)) * dtype.itemsize // 512) * 512
        self.made.append(t)
        return t

    def empty(self, shape, dtype, device):
        return self._make(shape, dtype, False)

    def zeros(self, shape, dtype, device):
        return self._make(shape, dtype, True)


@pytest.fixture
def fakes(monkeypatch):
    torch = FakeTorch()
    cupy = types.SimpleNamespace(ndarray=Array)
    monkeypatch.setattr(autograd_plan.device, "require", lambda: cupy)
    monkeypatch.setattr(
        autograd_plan, "unowned", lambda ptr, shape, dtype, device_id: Array(shape, dtype, Pointer(None, ptr))
    )
    monkeypatch.setattr(autograd_plan, "view", lambda t: Array(t.shape, t.dtype, Pointer(t, t.ptr)))
    return torch


def workspace(torch, spec, p, tiles, deterministic):
    """What the autograd backward makes of backward.workspace's list: (work arrays, the Backward)."""
    planned = autograd_plan.Backward(
        spec, None, *autograd_plan.layout(backward.workspace(spec, p, p.d, tiles, deterministic))
    )
    return planned.work(torch, "cuda:0")[0], planned


def problem(batch, heads, n, d):
    return types.SimpleNamespace(batch=batch, heads=heads, n=n, nk=n, d=d)


def test_rung_7s_work_arrays_lie_128_bytes_apart_in_one_allocation(fakes):
    # B = 1, H = 3, N = 200, d = 64, rung 7 (Br = 128, 2 Q blocks):
    #   D (1, 3, 200)             600 floats   → 608 words, at word 0
    #   dQ acc (1, 3, 200, 64)    38,400       → 38,400,    at word 608
    #   L, D blocks (1,3,2,2,128) 1536         → 1536,      at word 39,008
    #   arrivals (1, 3) int32     3            → 32,        at word 40,544;   40,576 words in all
    #   deterministic's counters (1, 3, 2) int32: zeroed, an allocation of their own
    spec = registry.BACKWARD[7]
    p, tiles = problem(1, 3, 200, 64), spec.tiles(64)
    work, _ = workspace(fakes, spec, p, tiles, True)
    flat, counters = fakes.made
    assert (flat.shape, flat.dtype, flat.zeroed) == ((40_576,), np.dtype("float32"), False)
    assert (counters.shape, counters.dtype, counters.zeroed) == ((1, 3, 2), np.dtype("int32"), True)
    listed = backward.workspace(spec, p, 64, tiles, True)
    assert [(w.shape, w.dtype.name) for w in work] == [(shape, dtype) for shape, dtype, _ in listed]
    assert [w.data.ptr - BASE for w in work[:4]] == [4 * x for x in (0, 608, 39_008, 40_544)]
    assert work[4].data.ptr == counters.ptr
    assert work[4].data.owner is counters
    ends = [w.data.ptr + w.dtype.itemsize * int(np.prod(w.shape)) for w in work[:4]]
    assert all(end <= start for end, start in zip(ends, [w.data.ptr for w in work[1:4]], strict=False))
    assert ends[-1] <= BASE + 4 * 40_576


@pytest.mark.parametrize(("rung", "d"), [(5, 64), (5, 128), (7, 64), (7, 128)])
@pytest.mark.parametrize(("batch", "heads", "n"), [(1, 1, 1), (2, 5, 77), (4, 16, 1024), (1, 3, 129)])
def test_every_filled_array_is_4_byte_words_aligned_to_128_bytes_and_none_overlap(fakes, rung, d, batch, heads, n):
    spec = registry.BACKWARD[rung]
    p, tiles = problem(batch, heads, n, d), spec.tiles(d)
    work, _ = workspace(fakes, spec, p, tiles, False)
    flat = fakes.made[0]
    assert len(fakes.made) == 1  # nothing zeroed without deterministic
    spans = sorted((w.data.ptr, w.data.ptr + w.dtype.itemsize * int(np.prod(w.shape))) for w in work)
    assert all(w.dtype.itemsize == 4 and (w.data.ptr - BASE) % 128 == 0 for w in work)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    assert spans[0][0] == BASE and spans[-1][1] <= BASE + 4 * flat.shape[0]


def test_the_views_of_one_address_are_made_once_and_a_new_address_gets_its_own(fakes):
    spec = registry.BACKWARD[7]
    p, tiles = problem(2, 5, 77, 64), spec.tiles(64)
    work, planned = workspace(fakes, spec, p, tiles, True)
    fakes.free_all()
    again = planned.work(fakes, "cuda:0")[0]
    assert all(a is b for a, b in zip(work[:4], again[:4], strict=True))  # same flat address: the same views
    assert again[4] is not work[4] and again[4].data.owner is fakes.made[1]  # the zeroed counters: this step's
    fakes.free_all()
    fakes.at += 512  # this step's allocation 512 bytes further on
    moved = planned.work(fakes, "cuda:0")[0]
    assert fakes.made[0].ptr == BASE + 512
    assert [w.data.ptr - a.data.ptr for w, a in zip(moved[:4], work[:4], strict=True)] == [512] * 4
