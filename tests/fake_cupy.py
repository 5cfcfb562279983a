"""What the GPU library's public calls read of CuPy arrays and devices, faked for the CPU tests of its host work
(tests/test_call_keys.py, tests/test_decode_keys.py): no GPU, no CuPy."""

import contextlib
import itertools
import types

import numpy as np

F16 = np.dtype("float16")
_addresses = itertools.count(1 << 20, 1 << 12)


class Device(contextlib.nullcontext):
    def __init__(self, device_id=0):
        super().__init__()
        self.id = device_id

    def __eq__(self, other):
        return self.id == other.id


class FakeArray:
    """A CuPy array's shape, dtype, strides, C-contiguity, device and address (`ptr`: a fresh one unless given)."""

    __module__ = "cupy.fake"  # gpu.pages.on_gpu reads the module of an array's type

    def __init__(self, shape, dtype=F16, device_id=0, strides=None, ptr=None):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)
        contiguous = [int(np.prod(shape[i + 1 :])) * self.dtype.itemsize for i in range(len(shape))]
        self.strides = tuple(strides or contiguous)
        live = [(s, c) for s, c, n in zip(self.strides, contiguous, shape, strict=True) if n > 1]
        self.flags = types.SimpleNamespace(c_contiguous=all(s == c for s, c in live))
        self.device = Device(device_id)
        self.data = types.SimpleNamespace(ptr=next(_addresses) if ptr is None else ptr)
        self.size = int(np.prod(shape))

    def astype(self, dtype):
        return type(self)(self.shape, dtype, self.device.id)

    @property
    def T(self):
        return type(self)(self.shape[::-1], self.dtype, self.device.id, self.strides[::-1], self.data.ptr)


def patch_flash(monkeypatch, flash, cupy, kernel) -> None:
    """gpu.flash's device, its SM count, tensor maps and compiled kernels faked: `cupy` for CuPy, an H100's
    capability, 132 SMs, maps as tuples of their addresses, every build `kernel`."""
    monkeypatch.setattr(flash.device, "require", lambda: cupy)
    monkeypatch.setattr(flash.device, "available", lambda: (True, "fake"))
    monkeypatch.setattr(flash.device, "capability", lambda: "9.0")
    monkeypatch.setattr(flash, "_sm_count", lambda device_id: 132)
    monkeypatch.setattr(flash.tma, "rows_map", lambda x, rows: ("map", x.data.ptr, rows))
    monkeypatch.setattr(flash.tma, "accumulator_map", lambda x, rows: ("acc", x.data.ptr, rows))
    monkeypatch.setattr(flash.source, "function", lambda spec, defines, smem=0: kernel)
