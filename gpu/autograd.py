"""The kernels as `torch.autograd.Function`s, so that they drop into a PyTorch model (tensors shared, not copied,
through DLPack): `attention(q, k, v, causal=…, scale=…, impl="flash" | "standard")` on torch tensors
(batch, heads, N, d), fp16/bf16 on a CUDA device. PyTorch is imported only when these are used.

The kernels run on PyTorch's current stream, so they order correctly with the model's own work.
"""

import functools

from gpu import device
from gpu.backward import flash_attention_backward
from gpu.device import GPUUnavailableError
from gpu.dlpack import as_cupy, as_torch
from gpu.flash import flash_attention
from gpu.standard import standard_attention, standard_attention_backward
from sim.core.errors import InputError

IMPLS = ("flash", "standard")


def attention(q, k, v, *, causal=False, scale=None, impl="flash"):
    """softmax(scale · q kᵀ) v with gradients, through flashsim's kernels: "flash" (the default forward and backward
    kernels, lse saved) or "standard" (the baseline: P saved, Algorithm 3's backward)."""
    require_torch()
    if impl not in IMPLS:
        raise InputError(f"impl: expected one of {', '.join(IMPLS)}, got {impl!r}")
    return _functions()[impl].apply(q, k, v, causal, scale)


def require_torch():
    """The torch module, or GPUUnavailableError naming what is missing (CuPy and a GPU, PyTorch with CUDA)."""
    device.require()
    try:
        import torch
    except ImportError:
        raise GPUUnavailableError(
            "the PyTorch wrappers need PyTorch with CUDA (pip install torch); it is not installed"
        ) from None
    if not torch.cuda.is_available():
        raise GPUUnavailableError("the PyTorch wrappers need PyTorch with CUDA; this PyTorch sees no CUDA GPU")
    return torch


def _on_torch_stream(fn, *tensors):
    """fn(*CuPy views of the tensors), launched on PyTorch's current stream."""
    import torch

    cuda, ptr = device.require().cuda, torch.cuda.current_stream().cuda_stream
    # CuPy ≥ 14 takes external streams through the CUDA stream protocol; CuPy 13 has ExternalStream only
    external = hasattr(cuda.Stream, "from_external")
    with cuda.Stream.from_external(_StreamHandle(ptr)) if external else cuda.ExternalStream(ptr):
        return fn(*(as_cupy(t.contiguous()) for t in tensors))


class _StreamHandle:
    """A raw cudaStream_t in the CUDA stream protocol, as CuPy's Stream.from_external takes it."""

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.ptr


@functools.cache
def _functions() -> dict:
    import torch

    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale):
            o, lse = _on_torch_stream(
                lambda *x: flash_attention(*x, causal=causal, scale=scale, return_lse=True), q, k, v
            )
            o, lse = as_torch(o), as_torch(lse)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal, ctx.scale = causal, scale
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            grads = _on_torch_stream(
                lambda *x: flash_attention_backward(*x, causal=ctx.causal, scale=ctx.scale), q, k, v, o, lse, do
            )
            return (*(as_torch(g) for g in grads), None, None)

    class StandardAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale):
            o, probs = _on_torch_stream(
                lambda *x: standard_attention(*x, causal=causal, scale=scale, return_probs=True), q, k, v
            )
            o, probs = as_torch(o), as_torch(probs)
            ctx.save_for_backward(q, k, v, probs)
            ctx.scale = scale
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, probs = ctx.saved_tensors
            grads = _on_torch_stream(lambda *x: standard_attention_backward(*x, scale=ctx.scale), q, k, v, probs, do)
            return (*(as_torch(g) for g in grads), None, None)

    return {"flash": FlashAttention, "standard": StandardAttention}
