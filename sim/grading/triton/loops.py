"""A loop's step as Triton compiles it: a negative step that is not a constant where the `for` stands is refused.

Triton's compiler counts a loop down only when its step is a constexpr at the `for` (a literal, a
constexpr argument, arithmetic of them, a helper returning one). Any other step (one made from a
launch argument, the program id or a load, or kept in a local variable: an assignment makes a tensor)
goes to the GPU's loop as it is (`scf.for … step %c-16_i32`), and a negative one runs no iteration
there (red team 91, on an H200), where Python's `range` counts down. Under the interpreter exactly
those steps arrive as `tl.tensor`s; the interpreted `range` and `tl.range` refuse one below zero.
"""

from contextlib import contextmanager

import numpy as np
import triton.language as tl
from triton.runtime import interpreter


def _refusing(make):
    """`make` (Python's `range` or the interpreter's `tl.range`) refusing a tensor step below zero."""

    def loop(*args, **named):
        step = named.get("step", args[2] if len(args) > 2 else None)
        data = np.asarray(step.handle.data) if isinstance(step, tl.tensor) else np.zeros(0)
        if data.size == 1 and data.reshape(-1)[0] < 0:
            raise ValueError(
                f"a loop's step is {data.reshape(-1)[0]} when the kernel runs and is not a constant where the `for` "
                "stands: a GPU runs such a loop no time (Triton counts down only a constexpr step); write the step "
                "in the `for`, e.g. -BLOCK_N, or count up"
            )
        return make(*args, **named)

    return loop


@contextmanager
def as_compiled(kernel):
    """`range` and `tl.range` refusing what a GPU would not run, for the launches of `kernel` and its module."""
    module, patch = kernel.fn.__globals__, interpreter._patch_lang
    own = "range" not in module  # a module binding `range` itself keeps it (the allow-list lets one constant be)

    def patched(fn):
        scope = patch(fn)
        scope.set_attr(tl, "range", _refusing(tl.range))  # after the interpreter's own `tl.range`
        return scope

    interpreter._patch_lang = patched
    if own:
        module["range"] = _refusing(range)
    try:
        yield
    finally:
        interpreter._patch_lang = patch
        if own:
            module.pop("range", None)
