"""PyTorch's `scaled_dot_product_attention` on CuPy arrays (shared through DLPack), the baselines of every speed
table, forward and forward + backward: its flash backend ("sdpa"), its cuDNN backend ("cudnn") and whatever
PyTorch picks by itself ("default": on an H100 with PyTorch 2.11, cuDNN's attention)."""

from gpu.dlpack import as_torch

BACKENDS = {"sdpa": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "default": None}  # key → SDPBackend name
LABELS = {"sdpa": "SDPA flash", "cudnn": "SDPA cuDNN", "default": "SDPA default"}


def torch_available() -> tuple[bool, str]:
    """(True, torch's version) when PyTorch imports and sees CUDA, else (False, why not)."""
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA GPU"
    return True, torch.__version__


def sdpa_call(q, k, v, *, causal: bool, scale: float, backend: str = "sdpa", do=None, backward_only=False):
    """A zero-argument callable running SDPA with `backend` (a key of BACKENDS) on q, k, v, or None without PyTorch.

    With `do`, the callable runs the forward and the backward (torch.autograd.grad against do, nothing
    accumulated); with `backward_only` too, the forward runs once here and the callable is its backward alone."""
    if not torch_available()[0]:
        return None
    import contextlib

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    name = BACKENDS[backend]
    tq, tk, tv = (as_torch(x).requires_grad_(do is not None) for x in (q, k, v))

    def forward():
        with sdpa_kernel(getattr(SDPBackend, name)) if name else contextlib.nullcontext():
            return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)

    if do is None:
        return forward
    tdo = as_torch(do)
    if backward_only:
        out = forward()
        return lambda: torch.autograd.grad(out, (tq, tk, tv), tdo, retain_graph=True)
    return lambda: torch.autograd.grad(forward(), (tq, tk, tv), tdo)


def flash_sdpa(q, k, v, *, causal: bool, scale: float, do=None):
    """SDPA's flash backend (sdpa_call with backend "sdpa"), the baseline of the harness and the ladder."""
    return sdpa_call(q, k, v, causal=causal, scale=scale, backend="sdpa", do=do)


def peak_extra_bytes(call) -> int:
    """The most memory PyTorch's allocator held during `call()` beyond what it held before."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    call()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before
