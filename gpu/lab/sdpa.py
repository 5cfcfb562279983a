"""PyTorch's `scaled_dot_product_attention` with the flash backend on CuPy arrays (shared through DLPack): the
baseline of every speed table, forward, and forward + backward."""

from gpu.dlpack import as_torch


def torch_available() -> tuple[bool, str]:
    """(True, torch's version) when PyTorch imports and sees CUDA, else (False, why not)."""
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA GPU"
    return True, torch.__version__


def flash_sdpa(q, k, v, *, causal: bool, scale: float, do=None):
    """A zero-argument callable running SDPA's flash backend on q, k, v, or None without PyTorch.

    With `do`, the callable runs the forward and the backward (torch.autograd.grad against do, nothing accumulated)."""
    if not torch_available()[0]:
        return None
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tq, tk, tv = (as_torch(x).requires_grad_(do is not None) for x in (q, k, v))

    def forward():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)

    if do is None:
        return forward
    tdo = as_torch(do)
    return lambda: torch.autograd.grad(forward(), (tq, tk, tv), tdo)


def peak_extra_bytes(call) -> int:
    """The most memory PyTorch's allocator held during `call()` beyond what it held before."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    call()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before
