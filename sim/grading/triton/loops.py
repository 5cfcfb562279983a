"""A loop's step as Triton compiles it: a negative step that is not a constant where the `for` stands is refused.

Triton's compiler counts a loop down only when its step is a constexpr at the `for` (a literal, a
constexpr argument, arithmetic of them, a helper returning one). Any other step goes to the GPU's loop
as it is (`scf.for … step %c-16_i32`), and a negative one runs no iteration there (red team 91, on an
H200), where the interpreter's Python `range` counts down. Such steps are found two ways, since the
interpreter keeps some of them as Python numbers: by the `for`'s text (red team 98: a step that names a
local variable, a loop's variable, or the launched kernel's own arguments, `-B if Nk > 0 else B`
included), and by its value (one that arrives as a `tl.tensor`: made from an argument, the program id
or a load, or kept in a local by an assignment, in a helper too). A helper's unannotated parameter is
what its call passed (`constness`): `walk(X, -BLOCK)` counts down on a GPU, `walk(X, s)` with s a
caller's loop variable (a tensor, `induction`) or local (a Python number) does not. Known gap (constness):
a helper called under another name than its own, and, where Python keeps no columns, a line holding
two calls of the helper of which one passes a constexpr.
"""

import ast
import sys
from contextlib import contextmanager

import numpy as np
import triton.language as tl
from triton.runtime import interpreter

from sim.grading.triton.constness import KernelFile
from sim.grading.triton.induction import compiled
from sim.grading.triton.truth import truth

RANGES = ("range",)  # (tl.static_range takes constexprs only: the compile check refuses the rest)


def sites(source: str | KernelFile, launched: str = "") -> dict[int, bool | frozenset[str]]:
    """Each line of each `for … in range(…)`'s header in a kernel file (its text, or as `KernelFile` read it) → how a
    negative step there is refused: True, whatever it arrives as (its text names a value known only at run time); the
    helper's unannotated parameters it names, where the call that passed them passed a value known only at run time;
    False, only as a tensor."""
    kernel = source if isinstance(source, KernelFile) else KernelFile(source, launched)
    out = {}
    for fn in kernel.functions.values():
        for loop in (n for n in ast.walk(fn) if isinstance(n, ast.For) and isinstance(n.iter, ast.Call)):
            step = _step(loop.iter)
            judged = False if step is None else kernel.judge(step, fn.name)
            out |= dict.fromkeys(range(loop.iter.lineno, loop.iter.end_lineno + 1), judged)
    return out


def _step(call: ast.Call) -> ast.expr | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in RANGES:
        return None
    given = {k.arg: k.value for k in call.keywords}
    return call.args[2] if len(call.args) > 2 else given.get("step")


def _refusing(make, file: str, table: dict[int, bool | frozenset[str]], kernel: KernelFile):
    """`make` (Python's `range` or the interpreter's `tl.range`) refusing a step below zero that `table` says is not
    a constexpr at its `for`, that a caller passed a helper as a value known only at run time, or that arrives as a
    tensor."""

    def loop(*args, **named):
        step = named.get("step", args[2] if len(args) > 2 else None)
        data = np.asarray(step.handle.data if isinstance(step, tl.tensor) else step if step is not None else 0)
        if data.size == 1 and np.issubdtype(data.dtype, np.number) and data.reshape(-1)[0] < 0:
            caller = sys._getframe(1)
            site = table.get(caller.f_lineno if caller.f_code.co_filename == file else None, True)
            origin = site is not True and site and kernel.passed(caller, file, site)
            if isinstance(step, tl.tensor) or site is True or origin:
                passes = f" (line {origin} passes it a value known only at run time)" if origin else ""
                raise ValueError(
                    f"a loop's step is {data.reshape(-1)[0]} when the kernel runs and is not a constant where the "
                    f"`for` stands{passes}: a GPU runs such a loop no time (Triton counts down only a constexpr "
                    "step); write the step in the `for`, e.g. -BLOCK_N, or count up"
                )
        return make(*args, **named)

    return loop


@contextmanager
def as_compiled(kernel, file: str):
    """For the launches of `kernel` (of `file`): `range` and `tl.range` refusing what a GPU would not run and handing
    out their values as a GPU's loop variable (`induction`), and a block's truth refused (`truth`)."""
    module, patch = kernel.fn.__globals__, interpreter._patch_lang
    with open(file, encoding="utf-8") as f:
        source = f.read()
    text = KernelFile(source, kernel.fn.__name__)  # parsed once: the `for` sites and the calls on the stack
    table = sites(text)
    own = "range" not in module  # a module binding `range` itself keeps it (the allow-list lets one constant be)

    def patched(fn):
        scope = patch(fn)
        scope.set_attr(tl, "range", _refusing(compiled(tl.range), file, table, text))  # after the interpreter's own
        scope.set_attr(tl.tensor, "__bool__", truth(file))  # after the interpreter's `_get_bool`
        return scope

    interpreter._patch_lang = patched
    if own:
        module["range"] = _refusing(compiled(range), file, table, text)
    try:
        yield
    finally:
        interpreter._patch_lang = patch
        if own:
            module.pop("range", None)
