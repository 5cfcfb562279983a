"""A call made while its stream captures a CUDA graph launches with arrays no cache evicts and no eager call shares
(gpu.captured; no GPU needed: a fake CuPy whose allocations are watched by weak references, so that an array is
"alive" only while something in the library holds it). The eager path's arrays go when their caches evict them (what a
graph replayed afterwards would write into); a captured call's stay: its plan is made for its capture (its own
tickets and workspace, made on a stream of its own and waited for), shared by the calls of that capture on that
stream, and held with the arrays the call allocated and dropped."""

import contextlib
import functools
import gc
import types
import weakref

import numpy as np
import pytest

from gpu import backward, captured, decode_launch, decoding, flash, pages
from sim.machine import hardware
from tests import fake_cupy

F16 = np.dtype("float16")


class Pool:
    """A fake CuPy: allocations (FakeArrays, host lists as NumPy arrays) remembered weakly by address, the current
    stream, which streams capture (stream → capture id), the kernels launched (their arguments as addresses)."""

    def __init__(self):
        self.stream, self.captures, self.launches, self.waited = 1, {}, [], []
        self.live = weakref.WeakValueDictionary()  # address → the array there, while something holds it
        self.made_on = {}  # address → the stream it was allocated on
        self.streams = iter(range(100, 200))
        pool = self

        class Stream:
            def __init__(self, non_blocking=False):
                self.ptr, self.outer = next(pool.streams), []

            def __enter__(self):
                self.outer.append(pool.stream)
                pool.stream = self.ptr
                return self

            def __exit__(self, *exc):
                pool.stream = self.outer.pop()

            def synchronize(self):
                pool.waited.append(self.ptr)

        self.cuda = types.SimpleNamespace(
            get_current_stream=lambda device_id=-1: types.SimpleNamespace(ptr=self.stream),
            runtime=types.SimpleNamespace(getDevice=lambda: 0, streamIsCapturing=lambda s: s in self.captures),
            Device=fake_cupy.Device, Stream=Stream,
            driver=types.SimpleNamespace(launchKernel=self.queued, launchCooperativeKernel=self.queued),
        )  # fmt: skip
        self.ndarray, self.float32, self.int32 = fake_cupy.FakeArray, np.float32, np.int32

    def made(self, x, address: int):
        self.live[address], self.made_on[address] = x, self.stream
        return x

    def empty(self, shape, dtype):
        x = fake_cupy.FakeArray(shape, dtype)
        return self.made(x, x.data.ptr)

    zeros = empty

    def empty_like(self, x):
        return self.empty(x.shape, x.dtype)

    def asarray(self, host, dtype=None):
        x = np.array(host)
        return self.made(x, x.ctypes.data)

    def kernel(self, grid, block, args, shared_mem=0):
        self.launches.append(tuple(address(a) for a in args))

    def queued(self, function, *rest):
        self.launches.append(tuple(decode_launch._params.buffer[0]))


def address(a):
    """An argument's address where it is an array (a FakeArray's pointer, a NumPy array's data), else itself."""
    if isinstance(a, fake_cupy.FakeArray):
        return a.data.ptr
    return a.ctypes.data if isinstance(a, np.ndarray) and a.ndim else a


@pytest.fixture
def pool(monkeypatch):
    cupy = Pool()
    fake_cupy.patch_flash(monkeypatch, flash, cupy, cupy.kernel)
    monkeypatch.setattr(captured, "capture_id", lambda stream: cupy.captures[stream])
    monkeypatch.setattr(captured, "relaxed", contextlib.nullcontext)
    monkeypatch.setattr(captured, "_plans", {})
    monkeypatch.setattr(captured, "_held", [])
    monkeypatch.setattr(captured, "_side", functools.cache(captured._side.__wrapped__))  # a side stream of this fake
    kernel = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=0xF000))
    tiles = types.SimpleNamespace(threads=128)
    monkeypatch.setattr(decode_launch, "kernels", lambda *a, **kw: (kernel, None, tiles, 0))
    monkeypatch.setattr(decode_launch, "merge_for", lambda *args: "ticket")
    monkeypatch.setattr(decode_launch, "_workspaces", decode_launch._workspaces.__class__())
    monkeypatch.setattr(decoding, "_hardware", lambda device_id: hardware.get(hardware.DEFAULT))
    monkeypatch.setattr(decoding, "_checked", {})
    flags = np.zeros(pages.ERRORS, np.int32)  # no paged entry refused
    monkeypatch.setattr(pages, "errors", lambda device_id: (flags, np.uintp(0xE0000), fake_cupy.FakeArray((1,))))
    forget()
    yield cupy
    forget()


def forget():
    """Every cache of the eager path emptied, as enough other shapes and streams would empty them."""
    backward.forget()  # its calls, plans and helper launches
    for cache in (flash._calls, decoding._checked, decode_launch._workspaces):
        cache.clear()
    for cache in (flash.make_plan, flash._device_walk, flash._device_units, decode_launch.plan):
        cache.cache_clear()
    gc.collect()


def qkv(shape, ptr):
    return [fake_cupy.FakeArray(shape, F16, ptr=ptr + (i << 28)) for i in range(3)]


def tickets_of(pool, launch):
    """The forward's tickets in a launch's arguments: the (2,) uint32 array allocated for them."""
    (found,) = [a for a in launch if isinstance(a, int) and a in pool.live and pool.live[a].dtype == np.uint32]
    return found


def test_a_captured_forward_has_tickets_of_its_own_held_after_every_cache_forgets_them(pool):
    q, k, v = qkv((4, 16, 4096, 128), 1 << 40)  # d = 128, N = 4096 causal: rung 6's ticketed walk (a host list)
    flash.flash_attention(q, k, v, causal=True)
    eager = pool.launches[-1]
    pool.captures[1] = 7  # stream 1 begins a capture
    flash.flash_attention(q, k, v, causal=True)
    flash.flash_attention(q, k, v, causal=True)
    first, second = pool.launches[-2:]
    mine, theirs = tickets_of(pool, first), tickets_of(pool, eager)
    assert mine != theirs and tickets_of(pool, second) == mine  # its own; shared by its capture's calls on stream 1
    side = pool.made_on[mine]
    assert side not in (1, *pool.captures) and pool.waited == [side]  # zeroed beside the capture, waited for
    walk = first[first.index(mine) - 2]  # the host's list (read only, before the count and the tickets): the stream's
    assert walk == eager[eager.index(theirs) - 2] and pool.live[walk].shape[1] == 4  # rows (plane, tile, tile, 0)
    lse = first[4]  # dropped by the call (return_lse=False): the graph writes it at every replay
    del pool.captures[1]  # the capture ends; an eager call takes the eager plan again
    flash.flash_attention(q, k, v, causal=True)
    assert tickets_of(pool, pool.launches[-1]) == theirs
    pool.captures[1] = 8  # another capture: other tickets
    flash.flash_attention(q, k, v, causal=True)
    assert tickets_of(pool, pool.launches[-1]) not in (mine, theirs)
    forget()
    assert theirs not in pool.live  # evicted: back in the pool
    assert {mine, walk, lse} <= set(pool.live)  # what the first capture's graph reads and writes: held


def test_a_captured_decode_step_has_a_workspace_of_its_own_held_past_the_workspaces_kept(pool):
    """Flash-Decoding's partials (O_parts, lse_parts) and tickets, arguments 7–9 of its launch."""
    q, k, v = qkv((2, 8, 1, 64), 1 << 40)
    k, v = (fake_cupy.FakeArray((2, 2, 300, 64), F16) for _ in range(2))
    decoding.decode(q, k, v, splits=3)
    eager = pool.launches[-1][7:10]
    pool.captures[1] = 5
    decoding.decode(q, k, v, splits=3)
    decoding.decode(q, k, v, splits=3)
    mine = pool.launches[-1][7:10]
    assert pool.launches[-2][7:10] == mine and not set(mine) & set(eager)
    assert {pool.made_on[x] for x in mine} == {pool.waited[0]} and pool.waited[0] != 1
    del pool.captures[1]
    for nk in range(301, 301 + decode_launch.WORKSPACES + 1):  # more shapes than the workspaces kept
        k, v = (fake_cupy.FakeArray((2, 2, nk, 64), F16) for _ in range(2))
        decoding.decode(q, k, v, splits=3)
        assert not set(pool.launches[-1][7:10]) & set(mine)  # never handed to an eager call
    forget()
    assert not set(eager) & set(pool.live) and set(mine) <= set(pool.live)


def test_a_captured_backward_holds_the_work_arrays_it_allocated(pool):
    q, k, v = qkv((1, 2, 256, 64), 1 << 40)
    o, do = (fake_cupy.FakeArray(q.shape, F16) for _ in range(2))
    lse = fake_cupy.FakeArray((1, 2, 256), np.float32)
    ours = {x.data.ptr for x in (q, k, v, o, do, lse)}

    def allocated(launches):
        """Every array the launches were given that the call allocated (not the caller's)."""
        return {a for launch in launches for a in launch if isinstance(a, int) and a in pool.made_on} - ours

    backward.flash_attention_backward(q, k, v, o, lse, do)
    eager = allocated(pool.launches)
    pool.captures[1], pool.launches = 3, []
    backward.flash_attention_backward(q, k, v, o, lse, do)
    mine = allocated(pool.launches)
    assert len(eager) == len(mine) == 7  # rung 7: D, the dQ accumulator, its L and D blocks, its counter; dq, dk, dv
    gc.collect()
    assert not eager & set(pool.live) and mine <= set(pool.live)
