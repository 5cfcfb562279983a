"""Rung 6's launcher hands the kernel the host's list of units (causal_walk, a packed batch's packed_units) as a
device array it keeps between calls (no GPU needed: fakes of CuPy). cupy.asarray copies a list on the current stream
without waiting, so a list is kept per stream: a kernel on another stream, which does not wait for that stream, never
reads a list whose copy may not have run yet (gpu.decoding keeps its workspaces per stream likewise). The persistent
walk's tickets (two counters the thread blocks take their units from, zero at every launch) are each plan's own: a
shape on one stream."""

import contextlib
import types

import numpy as np
import pytest

from gpu import flash, inputs, registry
from sim.machine.grids import causal_walk


class FakeCupy:
    """What flash.launch and _device_walk touch of CuPy: the current stream, Device contexts, asarray, zeros."""

    def __init__(self):
        self.stream, self.copies, self.zeroed = 1, [], []
        self.cuda = types.SimpleNamespace(
            get_current_stream=lambda: types.SimpleNamespace(ptr=self.stream),
            Device=lambda device_id: contextlib.nullcontext(),
        )

    def asarray(self, host):
        array = np.array(host)
        self.copies.append((self.stream, array))
        return array

    def zeros(self, shape, dtype):
        array = np.zeros(shape, dtype)
        self.zeroed.append((self.stream, array))
        return array


@pytest.fixture
def launched(monkeypatch):
    cupy, calls = FakeCupy(), []
    monkeypatch.setattr(flash.device, "require", lambda: cupy)
    monkeypatch.setattr(flash, "_sm_count", lambda device_id: 132)
    monkeypatch.setattr(flash.tma, "rows_map", lambda x, rows: x)
    monkeypatch.setattr(flash.source, "function", lambda spec, defines, smem: lambda *a, **kw: calls.append(a))
    flash._device_walk.cache_clear()
    flash.make_plan.cache_clear()
    yield cupy, calls
    flash._device_walk.cache_clear()
    flash.make_plan.cache_clear()


def test_the_causal_walk_is_copied_once_a_stream_and_each_kernel_reads_its_streams_copy(launched):
    cupy, calls = launched
    spec = registry.FORWARD[6]
    # 16k tokens at d = 64, N = 1024 causal: 512 planes, Br = 128: 2048 pairs on 132 blocks, the host's walk (WALK)
    p = inputs.Problem(batch=16, heads=32, n=1024, nk=1024, d=64, dtype="float16", causal=True, scale=0.125)
    tiles = spec.tiles_for(64, 1024, True)
    q = types.SimpleNamespace(device=types.SimpleNamespace(id=0), data=types.SimpleNamespace(ptr=1 << 20))

    def launch():
        flash.launch(spec, p, tiles, q, q, q, q, None)
        args = calls[-1][2]
        return next(a for a in args if isinstance(a, np.ndarray) and a.ndim == 2 and a.shape[1] == 4)

    first = launch()
    assert launch() is first and len(cupy.copies) == 1  # the same stream: the list kept
    cupy.stream = 2
    second = launch()
    assert second is not first and [s for s, _ in cupy.copies] == [1, 2]  # another stream: its own copy
    assert (second == first).all()
    cupy.stream = 1
    assert launch() is first


def walk_args(calls):
    """The last launch's persistent walk's arguments: (the host's list, if any), the number of units, the tickets
    (the uint32 pair); before them N, Nk, τ, causal, planes and a variant's arguments, after them O's tensor map."""
    args = calls[-1][2]
    at = next(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype == np.uint32)
    listed = isinstance(args[at - 2], np.ndarray) and args[at - 2].ndim == 2
    return args[at - 2 if listed else at - 1 : at + 1]


def test_a_ticketed_walk_reaches_the_kernel_in_the_order_tickets_take_it_without_empty_rows(launched):
    """At d = 128 with long rows the thread blocks take units from tickets (geometry.tickets): the host's causal
    walk goes to the kernel in its order without the −1 rows of its last round, then the number of units and the
    tickets (zero); at d = 64 the blocks walk b, b + grid, … of the list as laid out, and there are no tickets."""
    cupy, calls = launched
    spec = registry.FORWARD[6]
    q = types.SimpleNamespace(device=types.SimpleNamespace(id=0), data=types.SimpleNamespace(ptr=1 << 20))
    # 16k tokens at d = 128, N = 4096 causal: 64 planes, Br = 128: 16 pairs a plane, 1024 pairs on 132 blocks
    p = inputs.Problem(batch=4, heads=16, n=4096, nk=4096, d=128, dtype="float16", causal=True, scale=0.125)
    flash.launch(spec, p, spec.tiles_for(128, 4096, True), q, q, q, q, None)
    units, n_units, tickets = walk_args(calls)
    laid_out = causal_walk(64, 4096, 4096, 128, 128, 132)  # rows x, x + 132, … for block x; −1 rows: none
    assert (laid_out[:, 0] < 0).any()  # the list the model's lockstep reads has empty slots in its last round
    real = laid_out[laid_out[:, 0] >= 0]
    assert (units == real).all() and int(n_units) == len(real) == len(units)
    assert tickets.dtype == np.uint32 and tickets.shape == (2,) and not tickets.any()
    assert calls[-1][0] == (132, 1, 1)
    p = inputs.Problem(batch=16, heads=32, n=1024, nk=1024, d=64, dtype="float16", causal=True, scale=0.125)
    flash.launch(spec, p, spec.tiles_for(64, 1024, True), q, q, q, q, None)
    args = calls[-1][2]
    assert not any(isinstance(a, np.ndarray) and a.dtype == np.uint32 for a in args)
    walk = next(a for a in args if isinstance(a, np.ndarray) and a.ndim == 2)
    assert (walk == causal_walk(512, 1024, 1024, 128, 128, 132)).all() and len(cupy.zeroed) == 1


@pytest.mark.parametrize(("causal", "units"), [(False, 16 * 32), (True, 16 * 16)])
def test_a_full_or_causal_window_walk_gets_its_count_of_units_and_tickets_of_its_own(launched, causal, units):
    """The full walk (and a window's) numbers its units itself: a ticketed kernel gets their count (tiles, or causal
    pairs of Q blocks) and the tickets; each stream's plan has its own tickets, a second call on a stream reuses them."""
    cupy, calls = launched
    spec = registry.FORWARD[6]
    p = inputs.Problem(batch=2, heads=8, n=4096, nk=4096, d=128, dtype="float16", causal=causal, scale=0.125)
    tiles = spec.tiles_for(128, 4096, causal)  # Br = 128: Tr = 32
    q = types.SimpleNamespace(device=types.SimpleNamespace(id=0), data=types.SimpleNamespace(ptr=1 << 20))
    variant = flash.variants.Variant(window=(256, 0 if causal else 256))
    flash.launch(spec, p, tiles, q, q, q, q, None, variant)
    n_units, tickets = walk_args(calls)
    assert int(n_units) == units and calls[-1][0] == (min(units, 132), 1, 1)
    flash.launch(spec, p, tiles, q, q, q, q, None, variant)
    assert walk_args(calls)[-1] is tickets and len(cupy.zeroed) == 1
    cupy.stream = 2
    flash.launch(spec, p, tiles, q, q, q, q, None, variant)
    assert walk_args(calls)[-1] is not tickets and [s for s, _ in cupy.zeroed] == [1, 2]
