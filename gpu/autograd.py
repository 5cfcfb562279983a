"""The kernels as `torch.autograd.Function`s, so that they drop into a PyTorch model (tensors shared, not copied): `attention(q, k, v, causal=…, scale=…, impl="flash" | "standard")` on torch tensors
(batch, heads, N, d), fp16/bf16 on a CUDA device. PyTorch is imported only when these are used.

The flash path adds no tax to the kernels it launches: they run on PyTorch's current stream (so they order with
the model's own work), nothing synchronizes the host, and the only memory allocated is what the kernels write
(o and the saved lse; dq, dk, dv and the backward's float32 workspace, D and the dQ accumulator), taken from
PyTorch's caching allocator on that stream. Inputs are copied only where they are not contiguous, or where d
needs rows padded to 8 elements (the general path, through flash_attention). The flash path sees torch's memory
through CuPy views of its pointers, made once per address (gpu.autograd_plan.view; DLPack's __dlpack__ queries
streams and devices on every call, 58 µs a tensor in PyTorch 2.11: gpu/NOTES.md run 23), and checks and plans a
step once per key of q, k, v's shapes, strides, dtypes and devices with causal and scale (gpu.autograd_plan; run
41-autohost14). The general path and the standard baseline go through DLPack.

The backward runs where PyTorch's autograd engine runs it: by default, for CUDA tensors, on the engine's own thread
for the device, which wakes for it and hands the result back; our Python there runs 2.4–2.8× slower than on the
calling thread. A loop whose step is host-paced (one GPU, N ≤ 1024 at 16k tokens) saves ~360–440 µs a step under
`torch.autograd.set_multithreading_enabled(False)` (the backward on the calling thread; gpu/NOTES.md run 40-tax2).
"""

import functools

from gpu import autograd_plan, backward, device, flash
from gpu.device import GPUUnavailableError
from gpu.dlpack import as_cupy, as_torch
from gpu.standard import standard_attention, standard_attention_backward
from sim.core.errors import InputError

IMPLS = ("flash", "standard")


def attention(q, k, v, *, causal=False, scale=None, impl="flash", deterministic=False, **variants):
    """softmax(scale · q kᵀ) v with gradients, through flashsim's kernels: "flash" (the default forward and backward
    kernels, lse saved) or "standard" (the baseline: P saved, Algorithm 3's backward). `deterministic` (flash):
    gradients bit for bit the same on every run (the backward's rung 7 adds dQ in a fixed order). `variants`: the
    forward's (gpu.flash_attention's window, alibi_slopes, softcap, cu_seqlens_q/k, max_seqlen_q/k; k, v with fewer
    heads), with gradients through the backward's default for the call (rung 7 on sm_90 for GQA, windows and packed
    batches, else rung 5; the general path, through DLPack)."""
    torch = require_torch()
    if impl not in IMPLS:
        raise InputError(f"impl: expected one of {', '.join(IMPLS)}, got {impl!r}")
    if deterministic is not False and (impl != "flash" or deterministic is not True):
        raise InputError(
            f"deterministic: expected True or False (impl flash only), got {deterministic!r} with impl {impl!r}"
        )
    if variants or _gqa(q, k):
        return _variant_forward(torch, q, k, v, causal, scale, impl, variants, deterministic)
    if impl == "standard":
        return _functions()[impl].apply(q, k, v, causal, scale)
    return _functions()[impl].apply(q, k, v, causal, scale, deterministic)


# issue 25, part 1: the forward's variants pass through to gpu.flash_attention and gpu.flash_attention_backward (its
# default rung for the call); BACKWARD_VARIANTS names those the backward takes: a variant outside it that needs
# gradients is refused in one line.
BACKWARD_VARIANTS = (
    "gqa", "window", "alibi_slopes", "softcap", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"
)  # fmt: skip


def _variant_forward(torch, q, k, v, causal, scale, impl, variants, deterministic):
    """The flash forward with variants, on PyTorch's stream, with the backward's gradients (`deterministic` handed to
    it: honoured by rung 7, refused in one line by a backward that cannot); refused where a gradient would need a
    variant the backward does not take."""
    names = [*variants, *(["gqa (k, v with fewer heads)"] if _gqa(q, k) else [])]
    missing = [name for name in names if name.split(" ")[0] not in BACKWARD_VARIANTS]
    if impl != "flash" or (missing and torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))):
        why = f"impl {impl!r} takes none" if impl != "flash" else "the backward kernels do not take them"
        raise InputError(f"{', '.join(missing or names)}: {why}; run the forward under torch.no_grad() or without them")
    variants = {name: x.cpu().numpy() if hasattr(x, "cpu") else x for name, x in variants.items()}  # torch → host
    return _functions()["variants"].apply(q, k, v, causal, scale, variants, deterministic)


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


def _forward(torch, q, k, v, causal, scale, stream):
    """(o, lse, step, views) with o and lse torch tensors the forward kernel wrote straight into, step the key's
    autograd_plan.Step (the checked Problem, the plans) and views the CuPy views of (q, k, v, o, lse), which the
    backward reuses. `stream`: PyTorch's current stream as a CuPy stream, current here."""
    step = autograd_plan.step(q, k, v, causal, scale)
    cq, ck, cv = (autograd_plan.view(t) for t in (q, k, v))
    if step.general:  # rows padded to 8 elements: the general path (it copies)
        co, clse = flash.flash_attention(cq, ck, cv, causal=causal, scale=scale, return_lse=True)
        return as_torch(co), as_torch(clse), step, (cq, ck, cv, co, clse)
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    # the views own nothing (autograd_plan.view): a view owning o (which gets this node as grad_fn) would make a
    # cycle, ctx → views → o → grad_fn → ctx, which only Python's garbage collector frees (run 40-tax2)
    co, clse = autograd_plan.view(o), autograd_plan.view(lse)
    step.forward(stream.ptr, q.get_device(), cq, ck, cv, co, clse)
    return o, lse, step, (cq, ck, cv, co, clse)


def _backward(torch, step, saved, views, do, deterministic=False):
    """(dq, dk, dv) as torch tensors, written by the backward kernels into tensors PyTorch allocated; step is the
    forward's autograd_plan.Step, saved its (q, k, v, o, lse) and views their CuPy views (no second check)."""
    cq, ck, cv, co, clse = views
    cdo, p = autograd_plan.view(do), step.p
    planned = step.backward(deterministic)
    if planned.plan is None or clse.data.ptr % 16:
        grads = backward.flash_attention_backward(
            cq, ck, cv, co, clse, cdo, causal=p.causal, scale=p.scale, deterministic=deterministic
        )
        return tuple(as_torch(g) for g in grads)
    work, _held = planned.work(torch, do.device)  # the tensors under work: alive till the launches are queued
    grads = tuple(torch.empty_like(x) for x in saved[:3])  # dk, dv shaped like k, v (Nk rows)
    outs = tuple(map(autograd_plan.view, grads))
    backward.launch_plan(planned.plan, p, (cq, ck, cv, co, clse, cdo), work, outs, backward.PLAIN)
    return grads


@functools.cache
def _functions() -> dict:
    import torch

    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, scale, deterministic):
            q, k, v = (x.detach().contiguous() for x in (q, k, v))  # a copy only where not contiguous
            with (stream := _stream(q.device.index)):
                o, lse, ctx.step, ctx.views = _forward(torch, q, k, v, causal, scale, stream)
            ctx.save_for_backward(q, k, v, o, lse)  # PyTorch's check that none changed in place before backward
            ctx.deterministic = deterministic
            return o

        @staticmethod
        def backward(ctx, do):
            saved = ctx.saved_tensors  # raises if q, k, v, o or lse changed in place since the forward
            with _stream(do.device.index):
                grads = _backward(torch, ctx.step, saved, ctx.views, do.contiguous(), ctx.deterministic)
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
        def forward(ctx, q, k, v, causal, scale, variants, deterministic):
            ins = tuple(x.detach().contiguous() for x in (q, k, v))
            with _stream():
                o, lse = flash.flash_attention(
                    *map(as_cupy, ins), causal=causal, scale=scale, return_lse=True, **variants
                )  # fmt: skip
            o, lse = as_torch(o), as_torch(lse)
            ctx.save_for_backward(*ins, o, lse)
            ctx.args = causal, scale, variants, deterministic
            return o

        @staticmethod
        def backward(ctx, do):
            causal, scale, variants, deterministic = ctx.args
            with _stream():
                grads = backward.flash_attention_backward(
                    *(as_cupy(x) for x in (*ctx.saved_tensors, do.contiguous())), causal=causal, scale=scale,
                    deterministic=deterministic, **variants,
                )  # fmt: skip
            return (*(as_torch(g) for g in grads), None, None, None, None)

    return {"flash": FlashAttention, "standard": StandardAttention, "variants": VariantAttention}
