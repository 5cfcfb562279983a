"""Whether a value in a kernel file is a constexpr when Triton compiles it: judged by its text where it is written,
and a helper's parameter by the argument that the call on the interpreter's stack passed it.

A constexpr: a literal, a constexpr-annotated argument, a module constant, a function of the file, a
builtin, an import, arithmetic and calls of them, and a local that `NAME: tl.constexpr = value` alone binds,
judged by its value (`STEP: tl.constexpr = -BLOCK_N` counts down on a GPU). Known only at run time: a name
of the function's other locals (a loop's variable included), of the launched kernel's unannotated arguments,
or one the file does not bind. A helper's unannotated parameter is what its caller passed: Triton compiles
the helper again for each set of constexprs a call passes, so `walk(X, -BLOCK)` keeps a constexpr and
`walk(X, s)`, s a loop's variable, does not, though the interpreter hands both over as Python numbers. The
call is the one the caller's frame is running, found by its position in the caller's text (the file's lines,
which the interpreter's rewrite keeps); where Python keeps no columns (PYTHONNODEBUGRANGES), every call of
the helper on that line is a candidate, and the argument counts as known only at run time where every
candidate passes such a value. Not followed: a helper called under another name than its own (no call found:
the value decides alone).
"""

import ast
import builtins
import itertools


class KernelFile:
    """A kernel file's top-level functions, in which values' texts are judged; `launched` the kernel the grader
    launches (its unannotated arguments are the launch's, known only at run time)."""

    def __init__(self, source: str, launched: str):
        tree = ast.parse(source)
        known = {t.id for s in tree.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
        known |= {s.name for s in tree.body if isinstance(s, ast.FunctionDef)} | set(dir(builtins))
        known |= {a.asname or a.name.split(".")[0] for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)
                  for a in s.names}  # fmt: skip
        self.known = known
        self.functions = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
        self.names = {}  # function → (its constexpr parameters, its caller-made ones, its locals, its pinned ones)
        for fn in self.functions.values():
            params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            constant = {p.arg for p in params if p.annotation is not None and "constexpr" in ast.unparse(p.annotation)}
            caller_made = {p.arg for p in params} - constant if fn.name != launched else set()
            bound = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
            pinned = {n.target.id: n.value for n in ast.walk(fn) if isinstance(n, ast.AnnAssign) and n.value
                      and isinstance(n.target, ast.Name) and bound.count(n.target.id) == 1
                      and n.target.id not in {p.arg for p in params} and "constexpr" in ast.unparse(n.annotation)}  # fmt: skip
            self.names[fn.name] = (constant, caller_made, set(bound) - set(pinned), pinned)

    def judge(self, expr: ast.expr, where: str) -> bool | frozenset[str]:
        """`expr`, written in the function `where`: True if it names a value known only at run time; else the
        helper's unannotated parameters it names (a constexpr where the call passes constexprs for them), or False:
        none, a constexpr."""
        constant, caller_made, local, pinned = self.names[where]
        names, seen = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}, set()
        while grown := (names & pinned.keys()) - seen:  # a local `NAME: tl.constexpr = value` stands for its value
            seen |= grown
            names |= {n.id for name in grown for n in ast.walk(pinned[name]) if isinstance(n, ast.Name)}
        names -= seen
        if names & local or names - self.known - constant - caller_made:  # (a local shadows a constant)
            return True
        return frozenset(names & caller_made) or False

    def passed(self, frame, file: str, names: frozenset[str]) -> int | None:
        """The line of `file` where the helper running in `frame` was passed, for one of `names` (its unannotated
        parameters), a value known only at run time, followed outward through callers' own such parameters; None
        where the call passed constexprs (or is not found)."""
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename != file:
            caller = caller.f_back
        if caller is None or caller.f_code.co_name not in self.functions:  # (not a top-level function's frame)
            return None
        helper, outer = self.functions[frame.f_code.co_name], self.functions[caller.f_code.co_name]
        where = next(itertools.islice(caller.f_code.co_positions(), caller.f_lasti // 2, None))
        calls = [
            c for c in ast.walk(outer) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            and c.func.id == helper.name and all(w is None or w == at for w, at in zip(where, _span(c), strict=True))
        ]  # fmt: skip
        lines = [self._runtime(call, helper, caller, file, names) for call in calls]
        return lines[0] if lines and all(lines) else None

    def _runtime(self, call: ast.Call, helper: ast.FunctionDef, caller, file: str, names: frozenset[str]) -> int | None:
        """The line of `call`'s argument for one of `names` that is known only at run time, or None."""
        for name in sorted(names):
            argument = _argument(call, helper, name)
            judged = False if argument is None else self.judge(argument, caller.f_code.co_name)
            if judged is True:
                return argument.lineno
            if judged and (line := self.passed(caller, file, judged)):
                return line
        return None


def _span(node: ast.expr) -> tuple[int, int, int, int]:
    """A node's place as a code object's positions give it: line, end line, column, end column."""
    return node.lineno, node.end_lineno, node.col_offset, node.end_col_offset


def _argument(call: ast.Call, helper: ast.FunctionDef, name: str) -> ast.expr | None:
    """What `call` passes `helper`'s parameter `name`: by keyword, by position (the allow-list refuses `*`), or else
    a `**` mapping, judged whole; None where it passes nothing and the default, a literal, stands."""
    order = [p.arg for p in (*helper.args.posonlyargs, *helper.args.args)]
    at = order.index(name) if name in order else len(call.args)
    named = {k.arg: k.value for k in call.keywords}  # (under None: a `**` mapping)
    return named.get(name, call.args[at] if at < len(call.args) else named.get(None))
