"""flashsim's GPU port: FlashAttention-2 forward as CuPy RawKernels, next to a standard-attention baseline.

Imports without CuPy or a GPU; `available()` says whether one is usable, and every entry point used without
one raises `GPUUnavailableError` naming what is missing.
"""

from gpu.device import GPUUnavailableError, available
from gpu.flash import flash_attention
from gpu.reference import attention_ref
from gpu.standard import standard_attention
from gpu.tiling import DEFAULT_KERNEL, FLASH_KERNELS

__all__ = [
    "DEFAULT_KERNEL",
    "FLASH_KERNELS",
    "GPUUnavailableError",
    "attention_ref",
    "available",
    "flash_attention",
    "standard_attention",
]
