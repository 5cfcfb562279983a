"""The names of a kernel file live at each of its statements: a tile a GPU has freed is not held.

Triton compiles a kernel to SSA: a tile's registers are free after its last use, whatever Python
name still holds it. Under the interpreter a value lives while a name holds it, so the SRAM measure
(`interpret.Held`) counted tiles that were dead but still named (helper 110: an honest kernel holding
its K tile after `tl.dot`, its scores after `exp2` and the last iteration's V tile as it loads the
next one scored 40/100; renaming the scores into K's name made it fit; `del` is refused). `live`
gives, for each line of each top-level function, the names live into the statement that covers it:
read by it, or read later before being bound again, a loop followed round (backward dataflow on the
structured statements: `if`, `for`, `while`, `return`). A value held only by names dead where the
program is is not counted (`named`); one a live name, a container a live name holds, or nothing
named holds (an expression's operands) still is.
"""

import ast
import os
import sys

from triton.runtime import interpreter


def live(source: str) -> dict[tuple[str, int], frozenset[str]]:
    """(function, line) → the names live into the innermost statement covering that line, for every top-level
    function of `source` (a line of no statement is absent)."""
    table: dict[tuple[str, int], frozenset[str]] = {}
    for fn in ast.parse(source).body:
        if isinstance(fn, ast.FunctionDef):
            _block(fn.body, frozenset(), fn.name, table)
    return table


def _reads(node: ast.AST | None) -> frozenset[str]:
    """The names `node` reads."""
    if node is None:
        return frozenset()
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _binds(target: ast.AST) -> frozenset[str]:
    """The names an assignment to `target` binds (a subscript or attribute binds none: it reads its container)."""
    return frozenset(n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


def _block(body: list[ast.stmt], after: frozenset[str], fn: str, table: dict) -> frozenset[str]:
    """The names live into `body` when `after` are live out of it; each statement's entry in `table`."""
    for stmt in reversed(body):
        after = _statement(stmt, after, fn, table)
    return after


def _statement(stmt: ast.stmt, after: frozenset[str], fn: str, table: dict) -> frozenset[str]:
    """The names live into `stmt`; its lines (its header's, for a compound one) entered in `table`."""
    header_end = stmt.end_lineno
    if isinstance(stmt, ast.For | ast.While):
        header_end = stmt.body[0].lineno - 1
        kills = _binds(stmt.target) if isinstance(stmt, ast.For) else frozenset()
        uses = _reads(stmt.iter) if isinstance(stmt, ast.For) else _reads(stmt.test)
        exit_ = _block(stmt.orelse, after, fn, {}) if stmt.orelse else after
        head = exit_  # live at the loop's head: round the body until nothing more is added
        while True:
            new = (
                exit_
                | (_block(stmt.body, head, fn, {}) - kills)
                | (uses if isinstance(stmt, ast.While) else frozenset())
            )
            if new == head:
                break
            head = new
        _block(stmt.body, head, fn, table)
        _block(stmt.orelse, after, fn, table)
        into = head | uses
    elif isinstance(stmt, ast.If):
        header_end = stmt.body[0].lineno - 1
        into = _reads(stmt.test) | _block(stmt.body, after, fn, table) | _block(stmt.orelse, after, fn, table)
    elif isinstance(stmt, ast.Return):
        into = _reads(stmt.value)
    elif isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        into = (after - frozenset().union(*(_binds(t) for t in targets))) | _reads(stmt)
    else:  # an augmented assignment (its target read), an expression, an assert, a pass
        into = after | _reads(stmt) | (_binds(stmt.target) if isinstance(stmt, ast.AugAssign) else frozenset())
    for line in range(stmt.lineno, max(stmt.lineno, header_end) + 1):
        table.setdefault((fn, line), into)  # (inner statements, entered first, keep their own lines)
    return into


def named(file: str, table: dict[tuple[str, int], frozenset[str]]) -> tuple[set[int], set[int]]:
    """The ids of the handles that, in the frames of `file` on the stack, a name live where its frame is holds, and
    those only names dead there hold."""
    keep, drop = set(), set()
    frame = sys._getframe(1)
    while frame is not None:
        if os.path.realpath(frame.f_code.co_filename) == file:
            names = table.get((frame.f_code.co_name, frame.f_lineno))
            for name, value in frame.f_locals.items():
                (drop if names is not None and name not in names else keep).update(_handles(value, 4))
        frame = frame.f_back
    return keep, drop - keep


def _handles(value, depth: int) -> set[int]:
    """The ids of the value handles `value` holds: a tensor's own, or (`depth` levels down) a container's."""
    handle = getattr(value, "handle", None)
    if isinstance(handle, interpreter.TensorHandle):
        return {id(handle)}
    if depth and isinstance(value, tuple | list | dict):
        items = value.values() if isinstance(value, dict) else value
        return set().union(*(_handles(v, depth - 1) for v in items))
    return set()
