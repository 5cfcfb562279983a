"""gpu.autograd's flash path checked and planned once per key (issue 23; gpu/NOTES.md run 41-autohost14).

A step (forward, then backward) through `gpu.autograd.attention` is remembered by its key: each of q, k, v's (shape,
stride, dtype, device) after `.contiguous()` (`signature`: everything the CuPy views and `inputs.check` read), causal
and scale (`inputs.plain_options`: exact types only, else the full checks run every call), the current device (its
compute capability picks the kernels) and the forward's and backward's `resolve` (gpu.lab tools swap them). The
`Step` keeps the checked Problem, the forward kernel and its plan per stream, and per (deterministic, FUSED_PLANES)
the backward's kernel, plan and work arrays' layout in one allocation (`Backward`). A call then reads its tensors'
addresses, allocates what the kernels write and launches: no check, resolve or hashing of a Problem or kernel.

CuPy views of PyTorch's memory (`view`) are remembered by (address, shape, dtype, device) and own nothing: a view
is a pointer and a shape, the same whichever tensor lies at that address now, and each step's tensors are held by
the caller (or by ctx.save_for_backward) for as long as the launches that read them are queued on PyTorch's stream.
Owning nothing, ctx's views make no cycle through o's grad_fn (run 40-tax2). A CPU tensor gets gpu.dlpack's view.
"""

import dataclasses
import math

import numpy as np

from gpu import backward, captured, device, flash, inputs
from gpu.dlpack import _cupy_dtype, cupy_view

VIEWS_LIMIT = 1024  # views remembered by address; then forgotten all at once
WORK_ALIGN = 32  # each work array starts at a multiple of 128 bytes of the one allocation (TMA's reduce-adds need 16)


def signature(t) -> tuple:
    """What a contiguous tensor's CuPy view and the checks read of it: (shape, stride, dtype, device index)."""
    return t.shape, t.stride(), t.dtype, t.get_device()


def view(t):
    """The CuPy array over torch tensor `t`'s memory (contiguous), remembered by address, shape, dtype and device; it
    owns nothing (the caller holds `t` while the launches that read it are queued)."""
    key = (t.data_ptr(), t.shape, t.dtype, t.get_device())
    found = _views.get(key)
    if found is None:
        if key[3] < 0:  # not on a GPU: gpu.dlpack's view, which inputs.check refuses in one line
            return cupy_view(t)
        found = unowned(key[0], tuple(t.shape), _cupy_dtype(t.dtype), key[3])
        inputs.remember(_views, key, found, VIEWS_LIMIT)
    return found


def unowned(ptr: int, shape: tuple, dtype, device_id: int):
    """A CuPy array of `shape` and `dtype` at device address `ptr`, owning nothing."""
    cupy = device.require()
    memory = cupy.cuda.UnownedMemory(ptr, math.prod(shape) * dtype.itemsize, None, device_id)
    return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0))


@dataclasses.dataclass(frozen=True)
class Backward:
    """The backward of one Step's key and (deterministic, FUSED_PLANES): its kernel, and unless rows are padded (the
    general path, gpu.backward.flash_attention_backward) its plan and its work arrays' layout: (shape, dtype, offset
    in 4-byte words) of each filled one in one allocation of `words`, then the zeroed ones' (shape, dtype) apart."""

    spec: object  # gpu.registry.KernelSpec
    plan: backward.Plan | None
    filled: tuple = ()
    words: int = 0
    zeroed: tuple = ()
    views: dict = dataclasses.field(default_factory=dict)  # the allocation's (address, device) → filled views

    def work(self, torch, where) -> tuple:
        """(work, held): the work arrays (backward.workspace's list, in its order) as CuPy views over PyTorch's memory
        on `where`, one allocation for the filled ones (float32, rung 7's int32 counter) and the zeroed ones
        (deterministic's) apart, their views remembered by address; `held`, the tensors under them, which the caller
        keeps until the launches that use them are queued."""
        held = (torch.empty(self.words, dtype=torch.float32, device=where),)
        held += tuple(
            torch.zeros(shape, dtype=getattr(torch, dtype.name), device=where) for shape, dtype in self.zeroed
        )
        key = (held[0].data_ptr(), held[0].get_device())
        filled = self.views.get(key)
        if filled is None:
            filled = tuple(unowned(key[0] + 4 * at, shape, dtype, key[1]) for shape, dtype, at in self.filled)
            inputs.remember(self.views, key, filled, 64)
        return filled + tuple(map(view, held[1:])), held


def layout(listed: list) -> tuple:
    """(filled, words, zeroed) of backward.workspace's list: each filled array at a multiple of WORK_ALIGN words."""
    filled, zeroed, at = [], [], 0
    for shape, dtype, zero in listed:
        if zero:
            zeroed.append((shape, np.dtype(dtype)))
        else:
            assert not zeroed, "the zeroed work arrays come last"
            filled.append((shape, np.dtype(dtype), at))
            at += -(-math.prod(shape) // WORK_ALIGN) * WORK_ALIGN
    return tuple(filled), at, tuple(zeroed)


@dataclasses.dataclass(frozen=True)
class Step:
    """What every step of one key shares: the checked Problem, the forward kernel, whether rows are padded (the
    general path: gpu.flash.flash_attention, which copies), the forward's plans by stream and the `Backward`s."""

    p: inputs.Problem
    spec: object  # gpu.registry.KernelSpec
    general: bool
    plans: dict = dataclasses.field(default_factory=dict)
    backwards: dict = dataclasses.field(default_factory=dict)

    def forward(self, stream: int, device_id: int, q, k, v, o, lse) -> None:
        """The forward kernel on views of contiguous q, k, v and the outputs o, lse, on the current stream `stream`
        (capturing a graph: with a plan of that capture's own, gpu.captured; o, lse and the backward's work arrays
        come from PyTorch, whose graph pool keeps them for the graph)."""
        cupy, args = device.require(), (self.spec, self.p, None, (), device_id, stream)
        if captured.capturing(cupy, stream):
            plan = captured.plan(cupy, stream, flash.make_plan.__wrapped__, *args)
        else:
            plan = self.plans.get(stream)
            if plan is None:
                plan = flash.make_plan(*args)
                inputs.remember(self.plans, stream, plan, 16)
        flash.launch_plan(plan, self.p, q, k, v, o, lse, flash.PLAIN)

    def backward(self, deterministic: bool) -> Backward:
        """The Backward for `deterministic` (InputError, not remembered, where the kernel cannot honour it)."""
        key = (deterministic, backward.FUSED_PLANES)
        found = self.backwards.get(key)
        if found is None:
            p, spec = self.p, backward.resolve(None, self.p.d)
            if spec.row(p.d) != p.d:
                found = Backward(spec, None)
            else:
                tiles = spec.tiles(p.d)
                backward.check_deterministic(spec, tiles, deterministic)
                plan = backward.make_plan(spec, p, None, deterministic, (), (p.batch, p.heads, p.n), key[1])
                found = Backward(spec, plan, *layout(plan.work))
            inputs.remember(self.backwards, key, found, 16)
        return found


_steps: dict = {}  # key (signatures, options, current device, both resolves) → Step
_views: dict = {}  # (address, shape, dtype, device) → an unowned CuPy view


def step(q, k, v, causal, scale) -> Step:
    """The Step of contiguous q, k, v with causal and scale: remembered by key, else checked in full (inputs.check's
    one-line InputErrors) and, where the options are of the exact types a valid call passes, remembered."""
    cupy = device.require()
    options = inputs.plain_options(causal, scale, None, None)
    key = options and (
        signature(q), signature(k), signature(v), options, cupy.cuda.runtime.getDevice(), flash.resolve,
        backward.resolve,
    )  # fmt: skip
    found = _steps.get(key) if key else None
    if found is None:
        spec = flash.resolve(None, q.shape[-1])
        p = inputs.check(view(q), view(k), view(v), causal=causal, scale=scale, dtypes_allowed=spec.dtypes)
        found = Step(p, spec, spec.row(p.d) != p.d)
        if key:
            inputs.remember(_steps, key, found)
    return found


def forget() -> None:
    """Forget every step and view remembered here."""
    _steps.clear()
    _views.clear()
