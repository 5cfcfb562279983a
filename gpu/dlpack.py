"""Zero-copy between CuPy arrays and torch tensors through DLPack (bfloat16 passes as 16-bit integers)."""

import functools

import ml_dtypes
import numpy

from gpu import device, dtypes


def as_torch(x):
    """The torch tensor sharing `x`'s device memory."""
    import torch

    if dtypes.name(x.dtype) == "bfloat16":
        return torch.from_dlpack(x.view("int16")).view(torch.bfloat16)
    return torch.from_dlpack(x)


def as_cupy(t):
    """The CuPy array sharing torch tensor `t`'s device memory (`t` contiguous, on a CUDA device; never its graph)."""
    import torch

    cupy = device.require()
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return cupy.from_dlpack(t.view(torch.int16)).view(ml_dtypes.bfloat16)
    return cupy.from_dlpack(t)


def cupy_view(t):
    """The CuPy array over torch tensor `t`'s memory (contiguous, CUDA), built from its pointer without DLPack's
    per-call protocol (stream handshake, capsule): the same memory, kept alive by a reference to `t`."""
    cupy = device.require()
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), t.nbytes, t, t.device.index)
    return cupy.ndarray(tuple(t.shape), _cupy_dtype(t.dtype), cupy.cuda.MemoryPointer(memory, 0))


@functools.cache
def _cupy_dtype(dtype) -> numpy.dtype:
    """The NumPy dtype of a torch dtype (bfloat16: ml_dtypes'), once per dtype."""
    name = str(dtype).removeprefix("torch.")
    return numpy.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name)
