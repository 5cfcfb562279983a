"""Functions of the file called once, put back where they are called, for the similarity report's normal form.

Red team 103 hid copies by moving each loop's body into a helper that takes the loop's values and returns what the
next turn needs (`rows, = _step1(Br, N, chip, d, i)`: 0.51–0.75 against the original), and by spreading a master
over a class's methods (`self.step(i)`: 0.62). A function (or method: its first parameter is its object) the file
calls from one statement only, which is the call or assigns it, with plain parameters and no return but its last
statement, is put back there: its parameters assigned their arguments, then its body, then the statement's targets
assigned what it returns. Then every statement is numbered in order (lines), so that what follows reads the
inlined body as coming after what called it.
"""

import ast
import copy


def inlined(tree: ast.AST) -> set[int]:
    """The file's once-called functions put back at their calls; the ids of their definitions (to go)."""
    defs: dict[str, tuple[ast.FunctionDef, int]] = {}
    for holder in ast.walk(tree):
        for fn in getattr(holder, "body", []) if isinstance(getattr(holder, "body", None), list) else []:
            if isinstance(fn, ast.FunctionDef) and _plain(fn):
                defs[fn.name] = (fn, 1 if isinstance(holder, ast.ClassDef) else 0)  # a method: its object first
    uses: dict[str, int] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in defs:
            uses[n.id] = uses.get(n.id, 0) + 1
    gone: set[int] = set()
    for holder in list(ast.walk(tree)):
        body = getattr(holder, "body", None)
        if not isinstance(body, list):
            continue
        out = []
        for s in body:
            call = s.value if isinstance(s, ast.Assign | ast.Expr) else None
            name = call.func.id if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) else ""
            fn, skip = defs.get(name, (None, 0))
            params = [a.arg for a in fn.args.args[skip:]] if fn else []
            if fn is None or uses.get(name) != 1 or call.keywords or len(call.args) != len(params) or fn is holder:
                out.append(s)
                continue
            out += _put_back(s, fn, params, call.args)
            gone.add(id(fn))
        body[:] = out
    _number(tree)
    return gone


def _plain(fn: ast.FunctionDef) -> bool:
    """Plain parameters, no generator or scope statement, no return but the last statement."""
    a = fn.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        return False
    inner = [n for s in fn.body for n in ast.walk(s)]
    if any(isinstance(n, ast.Yield | ast.YieldFrom | ast.Await | ast.Global | ast.Nonlocal) for n in inner):
        return False
    returns = [n for n in inner if isinstance(n, ast.Return)]
    return all(r is fn.body[-1] for r in returns)


def _put_back(s: ast.Assign | ast.Expr, fn: ast.FunctionDef, params: list[str], args: list[ast.expr]) -> list:
    body = copy.deepcopy(fn.body)
    returned = body.pop().value if isinstance(body[-1], ast.Return) else None
    given = [ast.Assign(targets=[ast.Name(id=p, ctx=ast.Store())], value=a) for p, a in zip(params, args, strict=True)]
    if isinstance(s, ast.Assign) and returned is not None:
        body.append(ast.Assign(targets=s.targets, value=returned))
    elif returned is not None:
        body.append(ast.Expr(value=returned))
    return given + body


def _number(tree: ast.AST) -> None:
    """Each statement and what it holds on a line of its own, in order (columns kept)."""
    line = 0
    for node in ast.walk(tree):
        for s in getattr(node, "body", []) if isinstance(getattr(node, "body", None), list) else []:
            line += 1
            for n in ast.walk(s):
                if "lineno" in n._attributes:
                    n.lineno = n.end_lineno = line
                    n.col_offset = getattr(n, "col_offset", 0)
                    n.end_col_offset = getattr(n, "end_col_offset", 0)
