"""A loop's variable as Triton compiles it: a scalar of its bounds' integer type (i32), not a Python int.

Triton's compiler makes the variable of a `for … in range(…)` or `tl.range(…)` the induction variable
of an `scf.for`, of the type its bounds promote to (`CodeGenerator.visit_For`: `semantic.to_tensor` of
each bound, `integer_promote_impl` of their types; a Python int in [-2³¹, 2³¹) is an i32), so on a GPU
`(k - 1) // B` truncates toward zero, `(k - 1) % B` takes the sign of k - 1 and `k + 2147483616` wraps
(red team 106). Python's `range` hands out Python ints, which floor and never wrap. Here each value is
handed out as the interpreter holds a kernel's i32 argument (`_implicit_cvt`: a one-element array in a
`tl.tensor`), so what the kernel computes of it goes through the interpreter's integer operations, which
follow LLVM's (`create_idiv`: `(a - np.fmod(a, b)) // b`, truncation; `create_srem`: `np.fmod`, the
dividend's sign; `create_add`, `create_mul`: NumPy's int32 arithmetic, which wraps). It is index
arithmetic (`INDEX`) where every bound is. `tl.static_range` is unrolled when compiled: its
values stay Python ints. A loop whose bounds, or whose value past the last, do not fit its type is refused.
"""

import numpy as np
import triton.language as tl
from triton.runtime import interpreter

INDEX = "flashsim_index"  # the attribute that marks a handle as index arithmetic (`interpret`'s SRAM measure)


def _bounds(arg1, arg2=None, step=None, *_, **__) -> tuple:
    """start, end, step as `range` and `tl.range` take them (None where left out)."""
    return (None, arg1, step) if arg2 is None else (arg1, arg2, step)


def _type(bound) -> tl.dtype:
    """A bound's type when compiled: a tensor's own; a Python int's as `semantic.to_tensor` makes it; left out, i32."""
    if isinstance(bound, tl.tensor):
        return bound.dtype
    if bound is None:
        return tl.int32
    return interpreter.interpreter_semantic.to_tensor_type(bound.value if isinstance(bound, tl.constexpr) else bound)


def _value(bound) -> int:
    """A bound's value as a Python int."""
    if isinstance(bound, tl.tensor):
        return int(np.asarray(bound.handle.data).reshape(-1)[0])
    return int(bound.value if isinstance(bound, tl.constexpr) else bound)


def compiled(make):
    """`make` (Python's `range` or the interpreter's `tl.range`) handing out its values as the GPU's loop variable."""

    def loop(*args, **named):
        bounds = _bounds(*args, **named)
        kind = _type(bounds[0])
        for bound in bounds[1:]:
            kind = interpreter.interpreter_semantic.integer_promote_impl(kind, _type(bound))
        start, end, step = (0 if b is None else _value(b) for b in (bounds[0], bounds[1], bounds[2] or 1))
        storage = interpreter._get_np_dtype(kind)
        low, high = np.iinfo(storage).min, np.iinfo(storage).max
        counted = range(*((start, end) if step > 0 else (end, start)), abs(step))  # the GPU's scf.for
        past = counted[-1] + abs(step) if counted else start
        if not all(low <= v <= high for v in (start, end, past)):
            raise ValueError(
                f"a loop from {start} to {end} by {step} leaves the {kind} a GPU counts it in (its bounds' type): "
                "there it wraps; keep a loop's bounds and its last value plus its step within that type"
            )
        index = all(getattr(b.handle, INDEX, False) for b in bounds if isinstance(b, tl.tensor))
        given = {k: _value(v) if k in ("arg1", "arg2", "step") and v is not None else v for k, v in named.items()}
        for value in make(*map(_value, args[:3]), *args[3:], **given):
            handle = interpreter.TensorHandle(np.array([value], dtype=storage), kind)
            if index:
                setattr(handle, INDEX, True)
            yield tl.tensor(handle, kind)

    return loop
