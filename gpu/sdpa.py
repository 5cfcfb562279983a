"""PyTorch's `scaled_dot_product_attention` with the flash backend, on CuPy arrays shared through DLPack."""

from gpu import dtypes


def torch_available() -> tuple[bool, str]:
    """(True, torch's version) when PyTorch imports and sees CUDA, else (False, why not)."""
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA GPU"
    return True, torch.__version__


def as_torch(x):
    """The torch tensor sharing `x`'s device memory (bfloat16 passes through DLPack as 16-bit integers)."""
    import torch

    if dtypes.name(x.dtype) == "bfloat16":
        return torch.from_dlpack(x.view("int16")).view(torch.bfloat16)
    return torch.from_dlpack(x)


def flash_sdpa(q, k, v, *, causal: bool, scale: float):
    """A zero-argument callable running SDPA's flash backend on q, k, v, or None without PyTorch."""
    if not torch_available()[0]:
        return None
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tq, tk, tv = (as_torch(x) for x in (q, k, v))

    def call():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)

    return call


def peak_extra_bytes(call) -> int:
    """The most memory PyTorch's allocator held during `call()` beyond what it held before."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    call()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before
