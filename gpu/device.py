"""Whether a CUDA GPU and CuPy are usable here, and the error raised where they are not."""

import functools

from sim.core.errors import FlashsimError
from sim.machine import hardware


class GPUUnavailableError(FlashsimError):
    """The GPU port was used where CuPy or a CUDA GPU is missing; the message says which."""


@functools.cache
def available() -> tuple[bool, str]:
    """(True, the GPU's name) when CuPy imports and sees a CUDA GPU, else (False, what is missing)."""
    try:
        import cupy
    except ImportError:
        return False, "CuPy is not installed (pip install 'flashsim[gpu-cuda13]' or 'flashsim[gpu]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as e:
        return False, f"CuPy found no usable CUDA driver or GPU ({e})"
    if count == 0:
        return False, "CuPy sees no CUDA GPU"
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    if props["major"] < 8:
        return (
            False,
            f"{props['name'].decode()} is compute capability {props['major']}.{props['minor']}; flashsim's kernels need 8.0 (Ampere) or newer",
        )
    return True, props["name"].decode()


def require():
    """The `cupy` module, or GPUUnavailableError naming what is missing."""
    ok, reason = available()
    if not ok:
        raise GPUUnavailableError(f"the GPU port needs CuPy and an NVIDIA GPU: {reason}")
    import cupy

    return cupy


def capability() -> str:
    """The current device's compute capability, "9.0" on an H100 (cached per device: a call costs no driver query)."""
    return _capability(require().cuda.Device().id)


@functools.cache
def _capability(device_id: int) -> str:
    p = require().cuda.runtime.getDeviceProperties(device_id)
    return f"{p['major']}.{p['minor']}"


def properties() -> dict:
    """The current device's properties (name, SM count, L2, shared memory per block)."""
    cupy = require()
    p = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return {
        "name": p["name"].decode(),
        "cc": f"{p['major']}.{p['minor']}",
        "sm_count": p["multiProcessorCount"],
        "l2_bytes": p["l2CacheSize"],
        "smem_per_block_optin": p["sharedMemPerBlockOptin"],
        "total_bytes": p["totalGlobalMem"],
    }


def preset_for(name: str) -> hardware.Hardware | None:
    """The simulator's hardware preset for a device name ("NVIDIA H100 80GB HBM3" → H100-SXM), if any."""
    for key, preset in (
        ("H200", "H200"),
        ("H100", "H100-SXM"),
        ("A100-SXM4-40GB", "A100-40GB"),
        ("A100", "A100-80GB"),
        ("4090", "RTX-4090"),
    ):
        if key in name:
            return hardware.get(preset)
    return None
