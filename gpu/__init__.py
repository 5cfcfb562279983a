"""flashsim's GPU port: FlashAttention-2 forward and backward and Flash-Decoding (`decode`) as CuPy RawKernels, beside a standard-attention baseline.

Imports without CuPy, PyTorch or a GPU; `available()` says whether one is usable, and every entry point used
without one raises `GPUUnavailableError` naming what is missing. The kernels form a numbered ladder
(gpu/registry.py); `autograd.attention` wraps them for PyTorch models.
"""

from gpu import autograd
from gpu.backward import flash_attention_backward
from gpu.decoding import decode, decode_errors
from gpu.device import GPUUnavailableError, available
from gpu.flash import flash_attention
from gpu.reference import attention_backward_ref, attention_ref
from gpu.registry import BACKWARD, DEFAULT_BACKWARD, DEFAULT_FORWARD, FORWARD
from gpu.standard import standard_attention, standard_attention_backward

__all__ = [
    "BACKWARD",
    "DEFAULT_BACKWARD",
    "DEFAULT_FORWARD",
    "FORWARD",
    "GPUUnavailableError",
    "attention_backward_ref",
    "attention_ref",
    "autograd",
    "available",
    "decode",
    "decode_errors",
    "flash_attention",
    "flash_attention_backward",
    "standard_attention",
    "standard_attention_backward",
]
