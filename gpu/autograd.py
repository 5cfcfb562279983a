"""The kernels as `torch.autograd.Function`s, so that they drop into a PyTorch model (tensors shared, not copied): `attention(q, k, v, causal=…, scale=…, impl="flash" | "standard")` on torch tensors
(batch, heads, N, d), fp16/bf16 on a CUDA device. PyTorch is imported only when these are used.

The flash path adds no tax to the kernels it launches: they run on PyTorch's current stream (so they order with
the model's own work), nothing synchronizes the host, and the only memory allocated is what the kernels write
(o and the saved lse; dq, dk, dv and the backward's float32 workspace, D and the dQ accumulator), taken from
PyTorch's caching allocator on that stream. Inputs are copied only where they are not contiguous, or where d
needs rows padded to 8 elements (the general path, through flash_attention). The flash path sees torch's memory
through CuPy views of its pointers (gpu.dlpack.cupy_view): zero-copy like DLPack, but 6 µs a tensor against
DLPack's 58 (PyTorch 2.11's __dlpack__ queries streams and devices on every call; 16 tensors a training step:
0.9 ms of host time, gpu/NOTES.md run 23). The general path and the standard baseline go through DLPack.

The backward runs where PyTorch's autograd engine runs it: by default, for CUDA tensors, on the engine's own thread
for the device, which wakes for it and hands the result back; our Python there runs 2.4–2.8× slower than on the
calling thread. A loop whose step is host-paced (one GPU, N ≤ 1024 at 16k tokens) saves ~360–440 µs a step under
`torch.autograd.set_multithreading_enabled(False)` (the backward on the calling thread; gpu/NOTES.md run 40-tax2).
"""

import functools
import math

from gpu import backward, device, flash, inputs
from gpu.device import GPUUnavailableError
from gpu.dlpack import as_cupy, as_torch, cupy_view
from gpu.standard import standard_attention, standard_attention_backward
from sim.core.errors import InputError

IMPLS = ("flash", "standard")


def attention(q, k, v, *, causal=False, scale=None, impl="flash", deterministic=False, **variants):
    """softmax(scale · q kᵀ) v with gradients, through flashsim's kernels: "flash" (the default forward and backward
    kernels, lse saved) or "standard" (the baseline: P saved, Algorithm 3's backward). `deterministic` (flash):
    gradients bit for bit the same on every run (the backward's rung 7 adds dQ in a fixed order). `variants`: the
    forward's (gpu.flash_attention's window, alibi_slopes, softcap, cu_seqlens_q/k, max_seqlen_q/k; k, v with fewer
    heads), with gradients through the backward's rung 5 (the general path, through DLPack)."""
    torch = require_torch()
    if impl not in IMPLS:
        raise InputError(f"impl: expected one of {', '.join(IMPLS)}, got {impl!r}")
    if deterministic is not False and (impl != "flash" or deterministic is not True):
        raise InputError(
            f"deterministic: expected True or False (impl flash only), got {deterministic!r} with impl {impl!r}"
        )
    if variants or _gqa(q, k):
        return _variant_forward(torch, q, k, v, causal, scale, impl, variants)
    if impl == "standard":
        return _functions()[impl].apply(q, k, v, causal, scale)
    return _functions()[impl].apply(q, k, v, causal, scale, deterministic)


# issue 25, part 1: the forward's variants pass through to gpu.flash_attention and the backward's rung 5
# (gpu.flash_attention_backward); BACKWARD_VARIANTS names those the backward takes: a variant outside it that needs
# gradients is refused in one line.
BACKWARD_VARIANTS = (
    "gqa", "window", "alibi_slopes", "softcap", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"
)  # fmt: skip


def _variant_forward(torch, q, k, v, causal, scale, impl, variants):
    """The flash forward with variants, on PyTorch's stream, with the backward's gradients; refused where a gradient
    would need a variant the backward does not take."""
    names = [*variants, *(["gqa (k, v with fewer heads)"] if _gqa(q, k) else [])]
    missing = [name for name in names if name.split(" ")[0] not in BACKWARD_VARIANTS]
    if impl != "flash" or (missing and torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))):
        why = f"impl {impl!r} takes none" if impl != "flash" else "the backward kernels do not take them"
        raise InputError(f"{', '.join(missing or names)}: {why}; run the forward under torch.no_grad() or without them")
    variants = {name: x.cpu().numpy() if hasattr(x, "cpu") else x for name, x in variants.items()}  # torch → host
    return _functions()["variants"].apply(q, k, v, causal, scale, variants)


def _gqa(q, k) -> bool:
    """Whether k has fewer heads than q (both 4-D tensors)."""
    return getattr(q, "ndim", 0) == 4 and getattr(k, "ndim", 0) == 4 and k.shape[1] != q.shape[1]


def require_torch():
    """The torch module, or GPUUnavailableError naming what is missing (CuPy and a GPU, PyTorch with CUDA)."""
    device.require()
    return _torch()


@functools.cache  # a success only (a failure raises, and the next call asks again): the checks cost ~16 µs a
def _torch():  # call in the autograd step (run 40-tax2)
    try:
        import torch
    except ImportError:
        raise GPUUnavailableError(
            "the PyTorch wrappers need PyTorch with CUDA (pip install torch); it is not installed"
        ) from None
    if not torch.cuda.is_available():
        raise GPUUnavailableError("the PyTorch wrappers need PyTorch with CUDA; this PyTorch sees no CUDA GPU")
    return torch


def _stream(index=None):
    """PyTorch's current stream on device `index` (None: the current device) as a CuPy stream (one CuPy object per
    raw stream, made once). The raw handle comes from torch._C's accessor where it has one (what torch's own
    compiler calls): torch.cuda.current_stream resolves the device in Python, ~25 µs a call (run 39)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None and index is not None:
        return _external(raw(index))
    return _external(torch.cuda.current_stream(index).cuda_stream)


@functools.cache
def _external(ptr: int):
    cuda = device.require().cuda
    # CuPy ≥ 14 takes external streams through the CUDA stream protocol; CuPy 13 has ExternalStream only
    if hasattr(cuda.Stream, "from_external"):
        return cuda.Stream.from_external(_StreamHandle(ptr))
    return cuda.ExternalStream(ptr)


class _StreamHandle:
    """A raw cudaStream_t in the CUDA stream protocol, as CuPy's Stream.from_external takes it."""

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.ptr


def _forward(torch, q, k, v, causal, scale):
    """(o, lse, p, views) with o and lse torch tensors the forward kernel wrote straight into, p the checked Problem
    and views the CuPy views of (q, k, v, o, lse), which the backward reuses."""
    cq, ck, cv = (cupy_view(t) for t in (q, k, v))
    spec = _resolve(flash, q.shape[-1], device.capability())
    p = inputs.check(cq, ck, cv, causal=causal, scale=scale, dtypes_allowed=spec.dtypes)
    if spec.row(p.d) != p.d:  # rows padded to 8 elements: the general path (it copies)
        co, clse = flash.flash_attention(cq, ck, cv, causal=causal, scale=scale, return_lse=True)
        return as_torch(co), as_torch(clse), p, (cq, ck, cv, co, clse)
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    # the views own detached o and lse: owning o itself (which gets this node as grad_fn) would make a cycle,
    # ctx → views → o → grad_fn → ctx, which only Python's garbage collector frees, o's memory held till it ran:
    # at N = 1024, 16k tokens, 660 MiB held after 10 steps and a 2.5× higher peak (run 40-tax2)
    co, clse = cupy_view(o.detach()), cupy_view(lse.detach())
    flash.launch(spec, p, spec.tiles_for(p.d, p.n, p.causal), cq, ck, cv, co, clse)
    return o, lse, p, (cq, ck, cv, co, clse)


# each work array starts at a multiple of 128 bytes of the one allocation (TMA's reduce-adds need 16)
WORK_ALIGN = 32


def _workspace(torch, spec, p, tiles, deterministic, where):
    """The backward's work arrays (backward.workspace's list) as CuPy arrays over PyTorch's memory: those the kernels
    fill (float32, and rung 7's int32 counters the pre-pass zeroes) in one allocation, each array made straight
    from a pointer into it (one allocation and one view instead of one each, no slicing or reshaping of CuPy
    arrays); the zeroed ones (deterministic's int32 counters) apart."""
    cupy = device.require()
    listed = backward.workspace(spec, p, p.d, tiles, deterministic)
    sizes = [-(-math.prod(shape) // WORK_ALIGN) * WORK_ALIGN for shape, _, zeroed in listed if not zeroed]
    flat = torch.empty(sum(sizes), dtype=torch.float32, device=where)  # 4-byte words
    at = cupy_view(flat).data
    work = []
    for shape, dtype, zeroed in listed:
        if zeroed:
            work.append(cupy_view(torch.zeros(shape, dtype=getattr(torch, dtype), device=where)))
        else:
            work.append(cupy.ndarray(shape, dtype, at))
            at = at + 4 * -(-math.prod(shape) // WORK_ALIGN) * WORK_ALIGN  # a new pointer: += moves the old one
    return tuple(work)


def _backward(torch, p, views, do, deterministic=False):
    """(dq, dk, dv) as torch tensors, written by the backward kernels into tensors PyTorch allocated; p is the
    forward's checked Problem and views its CuPy views of (q, k, v, o, lse) (the same arrays: no second check)."""
    cq, ck, cv, co, clse = views
    cdo = cupy_view(do)
    spec = _resolve(backward, p.d, device.capability())
    if spec.row(p.d) != p.d or clse.data.ptr % 16:
        grads = backward.flash_attention_backward(
            cq, ck, cv, co, clse, cdo, causal=p.causal, scale=p.scale, deterministic=deterministic
        )
        return tuple(as_torch(g) for g in grads)
    tiles = spec.tiles(p.d)
    backward.check_deterministic(spec, tiles, deterministic)
    work = _workspace(torch, spec, p, tiles, deterministic, do.device)
    grads = tuple(torch.empty_like(do) for _ in range(3))
    backward.launch(spec, p, tiles, p.d, (cq, ck, cv, co, clse, cdo), work, tuple(map(cupy_view, grads)))
    return grads


@functools.cache
def _resolve(module, d: int, cc: str):
    """flash.resolve's or backward.resolve's default kernel for head dim d on a GPU of compute capability cc, looked up
    once (a refusal raises and is not kept): 9 and 19 µs a call (run 40-tax2)."""
    return module.resolve(None, d)


@functools.cache
def _functions() -> dict:
    import torch

    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale, deterministic):
            q, k, v = (x.detach().contiguous() for x in (q, k, v))  # a copy only where not contiguous
            with _stream(q.device.index):
                o, lse, ctx.problem, ctx.views = _forward(torch, q, k, v, causal, scale)
            ctx.save_for_backward(q, k, v, o, lse)  # PyTorch's check that none changed in place before backward
            ctx.deterministic = deterministic
            return o

        @staticmethod
        def backward(ctx, do):
            ctx.saved_tensors  # noqa: B018  (raises if q, k, v, o or lse changed in place since the forward)
            with _stream(do.device.index):
                grads = _backward(torch, ctx.problem, ctx.views, do.contiguous(), ctx.deterministic)
            return (*grads, None, None, None)

    class StandardAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale):
            with _stream():
                o, probs = standard_attention(
                    *(as_cupy(x.contiguous()) for x in (q, k, v)), causal=causal, scale=scale, return_probs=True
                )
            o, probs = as_torch(o), as_torch(probs)
            ctx.save_for_backward(q, k, v, probs)
            ctx.scale = scale
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, probs = ctx.saved_tensors
            with _stream():
                grads = standard_attention_backward(
                    *(as_cupy(x.contiguous()) for x in (q, k, v, probs, do)), scale=ctx.scale
                )
            return (*(as_torch(g) for g in grads), None, None)

    class VariantAttention(torch.autograd.Function):  # the general path: DLPack views, lse saved
        @staticmethod
        def forward(ctx, q, k, v, causal, scale, variants):
            ins = tuple(x.detach().contiguous() for x in (q, k, v))
            with _stream():
                o, lse = flash.flash_attention(
                    *map(as_cupy, ins), causal=causal, scale=scale, return_lse=True, **variants
                )  # fmt: skip
            o, lse = as_torch(o), as_torch(lse)
            ctx.save_for_backward(*ins, o, lse)
            ctx.args = causal, scale, variants
            return o

        @staticmethod
        def backward(ctx, do):
            causal, scale, variants = ctx.args
            with _stream():
                grads = backward.flash_attention_backward(
                    *(as_cupy(x) for x in (*ctx.saved_tensors, do.contiguous())), causal=causal, scale=scale,
                    **variants,
                )  # fmt: skip
            return (*(as_torch(g) for g in grads), None, None, None)

    return {"flash": FlashAttention, "standard": StandardAttention, "variants": VariantAttention}
