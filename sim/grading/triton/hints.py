"""Triton's hints checked while the grader interprets a kernel: the GPU trusts them, the interpreter ignores them.

`tl.multiple_of`, `tl.max_contiguous` and `tl.max_constancy` tell the compiler what it may assume of a
value: its loads and stores are vectorized on them, and a false one misaligns them (red team 106:
`d = tl.multiple_of(tl.maximum(d, 1), 16)` scored 100 interpreted and stopped on an H200 with
`misaligned address` at d = 36). Here each is checked against the values the hint is given, along
each dimension d with values[d] = v, and a false one is refused in one line:
  multiple_of: the first element of every run of consecutive integers (addresses a pointer's element
    apart) is a multiple of v (for a pointer: its address, in bytes; the decoys are aligned as a GPU's
    allocations are, `shadow`);
  max_contiguous: the values form runs of v consecutive integers (addresses) from every multiple of v;
  max_constancy: the values form runs of v equal ones.
A loop's variable or an argument the interpreter keeps as a Python number is checked as a 0-d value.
"""

from contextlib import contextmanager

import numpy as np
import triton.language as tl
from triton.runtime import interpreter

KINDS = ("multiple_of", "max_contiguous", "max_constancy")


def _data(x) -> tuple[np.ndarray, int]:
    """The hinted value's elements (as integers) and the step between consecutive ones (a pointer's element)."""
    if isinstance(x, tl.tensor):
        data, ty = np.asarray(x.handle.data), x.type.scalar
        data = data if x.shape else data.reshape(())  # (the interpreter keeps a scalar as one element)
        step = ty.element_ty.primitive_bitwidth // 8 if ty.is_ptr() else 1
        return data.astype(np.int64) if data.dtype.kind in "iub" else data, step
    return np.asarray(x), 1


def _false(kind: str, data: np.ndarray, step: int, values: list[int]) -> str:
    """Why the hint `kind` with `values` does not hold of `data`, or ""."""
    if data.dtype.kind not in "iu":
        return "" if kind == "max_constancy" else f"it is given {data.dtype} values, not integers or pointers"
    for axis, v in enumerate(values if data.ndim else values[:1]):
        runs = np.moveaxis(data, axis, -1) if data.ndim else data.reshape(1)
        n = runs.shape[-1]
        if kind == "multiple_of":
            first = np.ones(runs.shape, bool)
            first[..., 1:] = np.diff(runs, axis=-1) != step  # a run of consecutive values starts here
            bad = runs[first & (runs % v != 0)]
            if bad.size:
                return f"{int(bad.flat[0])}{' starts a run and' if data.ndim else ''} is not a multiple of {v}"
        elif n % v or v < 1:
            return f"{n} values along dimension {axis} are not runs of {v}"
        else:
            groups = runs.reshape(*runs.shape[:-1], n // v, v)
            offsets = np.arange(v) * step if kind == "max_contiguous" else np.zeros(v, np.int64)
            if not (groups == groups[..., :1] + offsets).all():
                what = "consecutive" if kind == "max_contiguous" else "equal"
                return f"the values along dimension {axis} are not runs of {v} {what} ones"
    return ""


def _checking(kind: str, hint):
    def check(x, values, *args, **named):
        given = [v.value if isinstance(v, tl.constexpr) else v for v in (values if isinstance(values, list | tuple)
                                                                         else [values])]  # fmt: skip
        data, step = _data(x)
        if why := _false(kind, data, step, [int(v) for v in given]):
            raise ValueError(f"tl.{kind}(…, {given[0] if len(given) == 1 else given}) is false here: {why}; a GPU "
                             "trusts it (its loads and stores are vectorized on it) where the interpreter ignores "
                             "it: drop the hint or make it true")  # fmt: skip
        return hint(x, values, *args, **named)

    return check


@contextmanager
def checked():
    """Every launch's `tl.multiple_of`, `tl.max_contiguous`, `tl.max_constancy` checked (after the interpreter's)."""
    patch = interpreter._patch_lang

    def patched(fn):
        scope = patch(fn)
        for kind in KINDS:
            scope.set_attr(tl, kind, _checking(kind, getattr(tl, kind)))
        return scope

    interpreter._patch_lang = patched
    try:
        yield
    finally:
        interpreter._patch_lang = patch
