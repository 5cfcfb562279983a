"""Rung 6's launcher hands the kernel the host's list of units (causal_walk, a packed batch's packed_units) as a
device array it keeps between calls (no GPU needed: fakes of CuPy). cupy.asarray copies a list on the current stream
without waiting, so a list is kept per stream: a kernel on another stream, which does not wait for that stream, never
reads a list whose copy may not have run yet (gpu.decoding keeps its workspaces per stream likewise)."""

import contextlib
import types

import numpy as np
import pytest

from gpu import flash, inputs, registry


class FakeCupy:
    """What flash.launch and _device_walk touch of CuPy: the current stream, Device contexts, asarray."""

    def __init__(self):
        self.stream, self.copies = 1, []
        self.cuda = types.SimpleNamespace(
            get_current_stream=lambda: types.SimpleNamespace(ptr=self.stream),
            Device=lambda device_id: contextlib.nullcontext(),
        )

    def asarray(self, host):
        array = np.array(host)
        self.copies.append((self.stream, array))
        return array


@pytest.fixture
def launched(monkeypatch):
    cupy, calls = FakeCupy(), []
    monkeypatch.setattr(flash.device, "require", lambda: cupy)
    monkeypatch.setattr(flash, "_sm_count", lambda device_id: 132)
    monkeypatch.setattr(flash.tma, "rows_map", lambda x, rows: x)
    monkeypatch.setattr(flash.source, "function", lambda spec, defines, smem: lambda *a, **kw: calls.append(a))
    flash._device_walk.cache_clear()
    flash._plan.cache_clear()
    yield cupy, calls
    flash._device_walk.cache_clear()
    flash._plan.cache_clear()


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
