"""Programmatic dependent launch (PDL, sm_90): cuLaunchKernelEx through ctypes with programmatic stream
serialization, so that a kernel's blocks may start while the kernel ahead of it in the stream finishes. The kernel
itself says where: `griddepcontrol.launch_dependents` lets the next launch start, `griddepcontrol.wait` waits for the
one ahead to finish and its writes to be seen. CuPy's launches take no launch attributes; cuLaunchKernelEx is one
driver call, captured into CUDA graphs as a programmatic edge."""

import ctypes
import functools

from gpu import captured, device

PROGRAMMATIC, COOPERATIVE = 6, 2  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, CU_LAUNCH_ATTRIBUTE_COOPERATIVE


class Attribute(ctypes.Structure):
    """CUlaunchAttribute: an id, then a 64-byte union whose first int is both attributes' value."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


class Config(ctypes.Structure):
    """CUlaunchConfig."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("count", ctypes.c_uint)]  # fmt: skip


def config(grid: tuple, threads: int, smem: int, stream: int, cooperative: bool = False) -> tuple:
    """(Config, its attributes): programmatic stream serialization, and cooperative where asked; keep both alive
    while the launch may be made."""
    ids = (PROGRAMMATIC, COOPERATIVE) if cooperative else (PROGRAMMATIC,)
    attrs = (Attribute * len(ids))(*(Attribute(i, b"", 1) for i in ids))
    found = Config((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(threads, 1, 1), smem, stream,
                   ctypes.addressof(attrs), len(ids))  # fmt: skip
    return found, attrs


def launch(config_address: int, function: int, params: int) -> None:
    """cuLaunchKernelEx(config, function, params, no extra), raising on a refusal."""
    status = _launch_ex()(config_address, function, params, None)
    if status != 0:
        raise RuntimeError(f"cuLaunchKernelEx failed: CUresult {status}")


@functools.cache
def _launch_ex():
    fn = captured.libcuda().cuLaunchKernelEx
    fn.argtypes, fn.restype = [ctypes.c_void_p] * 4, ctypes.c_int
    return fn


@functools.cache
def supported(device_id: int) -> bool:
    """Whether the device takes programmatic dependent launches: compute capability 9.0 or newer."""
    return device.require().cuda.runtime.getDeviceProperties(device_id)["major"] >= 9
