"""A loop's step as Triton compiles it: a negative step that is not a constant where the `for` stands is refused.

Triton's compiler counts a loop down only when its step is a constexpr at the `for` (a literal, a
constexpr argument, arithmetic of them, a helper returning one). Any other step goes to the GPU's loop
as it is (`scf.for … step %c-16_i32`), and a negative one runs no iteration there (red team 91, on an
H200), where the interpreter's Python `range` counts down. Such steps are found two ways, since the
interpreter keeps some of them as Python numbers: by the `for`'s text (red team 98: a step that names a
local variable, a loop's variable, or the launched kernel's own arguments, `-B if Nk > 0 else B`
included), and by its value (one that arrives as a `tl.tensor`: made from an argument, the program id
or a load, or kept in a local by an assignment, in a helper too). Known gap: a helper's unannotated
parameter is taken as its caller made it, and a caller's loop variable arrives as a Python number.
"""

import ast
import builtins
import sys
from contextlib import contextmanager

import numpy as np
import triton.language as tl
from triton.runtime import interpreter

RANGES = ("range",)  # (tl.static_range takes constexprs only: the compile check refuses the rest)


def sites(source: str, launched: str) -> dict[int, bool]:
    """Each line of each `for … in range(…)`'s header in a kernel file → whether a negative step there is refused
    whatever it arrives as (its text names a value known only at run time), rather than only as a tensor."""
    tree = ast.parse(source)
    known = {t.id for s in tree.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
    known |= {s.name for s in tree.body if isinstance(s, ast.FunctionDef)} | set(dir(builtins))
    known |= {a.asname or a.name.split(".")[0] for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)
              for a in s.names}  # fmt: skip
    out = {}
    for fn in (s for s in tree.body if isinstance(s, ast.FunctionDef)):
        params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        constant = {p.arg for p in params if p.annotation is not None and "constexpr" in ast.unparse(p.annotation)}
        caller_made = {p.arg for p in params} - constant if fn.name != launched else set()
        local = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        for loop in (n for n in ast.walk(fn) if isinstance(n, ast.For) and isinstance(n.iter, ast.Call)):
            step = _step(loop.iter)
            names = {n.id for n in ast.walk(step) if isinstance(n, ast.Name)} if step is not None else set()
            runtime = bool(names & local or names - known - constant - caller_made)  # (a local shadows a constant)
            out |= dict.fromkeys(range(loop.iter.lineno, loop.iter.end_lineno + 1), runtime)
    return out


def _step(call: ast.Call) -> ast.expr | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in RANGES:
        return None
    given = {k.arg: k.value for k in call.keywords}
    return call.args[2] if len(call.args) > 2 else given.get("step")


def _refusing(make, file: str, table: dict[int, bool]):
    """`make` (Python's `range` or the interpreter's `tl.range`) refusing a step below zero that `table` says is not
    a constexpr at its `for`, or that arrives as a tensor."""

    def loop(*args, **named):
        step = named.get("step", args[2] if len(args) > 2 else None)
        data = np.asarray(step.handle.data if isinstance(step, tl.tensor) else step if step is not None else 0)
        if data.size == 1 and np.issubdtype(data.dtype, np.number) and data.reshape(-1)[0] < 0:
            caller = sys._getframe(1)
            line = caller.f_lineno if caller.f_code.co_filename == file else None
            if isinstance(step, tl.tensor) or table.get(line, True):
                raise ValueError(
                    f"a loop's step is {data.reshape(-1)[0]} when the kernel runs and is not a constant where the "
                    "`for` stands: a GPU runs such a loop no time (Triton counts down only a constexpr step); write "
                    "the step in the `for`, e.g. -BLOCK_N, or count up"
                )
        return make(*args, **named)

    return loop


@contextmanager
def as_compiled(kernel, file: str):
    """`range` and `tl.range` refusing what a GPU would not run, for the launches of `kernel` (of `file`)."""
    module, patch = kernel.fn.__globals__, interpreter._patch_lang
    with open(file, encoding="utf-8") as f:
        table = sites(f.read(), kernel.fn.__name__)
    own = "range" not in module  # a module binding `range` itself keeps it (the allow-list lets one constant be)

    def patched(fn):
        scope = patch(fn)
        scope.set_attr(tl, "range", _refusing(tl.range, file, table))  # after the interpreter's own `tl.range`
        return scope

    interpreter._patch_lang = patched
    if own:
        module["range"] = _refusing(range, file, table)
    try:
        yield
    finally:
        interpreter._patch_lang = patch
        if own:
            module.pop("range", None)
