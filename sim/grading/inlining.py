"""Functions of the file called once, put back where they are called, for the similarity report's normal form.

Red team 103 hid copies by moving each loop's body into a helper that takes the loop's values and returns what the
next turn needs (`rows, = _step1(Br, N, chip, d, i)`: 0.51–0.75 against the original), and by spreading a master
over a class's methods (`self.step(i)`: 0.62; `Attention(chip, Br, Bc, scale).run()` and a method `rows(i)` called
twice: 0.72). A function (or method: its first parameter is its object) the file calls from one statement only,
which is the call, assigns it or returns it, with plain parameters and no return but its last statement, is put
back there: its parameters assigned their arguments, then its body, then the statement's targets assigned what it
returns; `C(a).m(b)`, C a class of plain methods made nowhere else, is C's `__init__` put back, then m. A function
that only returns an expression, called more than once, is that expression at each call (COPIES nodes of copies in
all). Inner bodies go first, so that a function put back carries the calls put back in it (INLINED nodes of bodies in
all). Then every statement is numbered in order (lines), so
that what follows reads the inlined body as coming after what called it.
"""

import ast
import copy

from sim.grading.tree_edits import reads_replaced

COPIES = 3000  # nodes the copies of a function's expression may add, called more than once
INLINED = 20_000  # nodes of the bodies put back, all told (a chain of helpers each calling the next copies each again)


def inlined(tree: ast.AST) -> set[int]:
    """The file's once-called functions put back at their calls; the ids of their definitions (to go)."""
    nodes = list(ast.walk(tree))
    defs: dict[str, tuple[ast.FunctionDef, int]] = {}
    for holder in nodes:
        for fn in getattr(holder, "body", []) if isinstance(getattr(holder, "body", None), list) else []:
            if isinstance(fn, ast.FunctionDef) and _plain(fn):
                defs[fn.name] = (fn, 1 if isinstance(holder, ast.ClassDef) else 0)  # a method: its object first
    classes = {c.name: c for c in nodes if isinstance(c, ast.ClassDef) and _methods_only(c)}
    uses: dict[str, int] = {}
    calls: dict[str, list[ast.Call]] = {}
    for n in nodes:
        if isinstance(n, ast.Name) and (n.id in defs or n.id in classes):
            uses[n.id] = uses.get(n.id, 0) + 1
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defs:
            calls.setdefault(n.func.id, []).append(n)
    gone, budget = _expanded(tree, defs, calls), INLINED
    for holder in reversed(nodes):  # inner bodies first: a function's calls put back before it is
        body = getattr(holder, "body", None)
        if not isinstance(body, list):
            continue
        out = []
        for s in body:
            call = s.value if isinstance(s, ast.Assign | ast.Expr | ast.Return) else None
            made = _made(call, classes, uses)
            size = sum(_size(t) for fn, _ in made or [] for t in fn.body)
            if made is not None and size <= budget:  # C(a).m(b): C's __init__ given a, then m given b
                budget -= size
                out += [t for fn, args in made for t in _put_back(s if fn is made[-1][0] else None, fn, args, gone)]
                gone |= {id(fn) for fn, _ in made} | {id(classes[call.func.value.func.id])}
                continue
            name = call.func.id if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) else ""
            fn, skip = defs.get(name, (None, 0))
            params = [a.arg for a in fn.args.args[skip:]] if fn else []
            if fn is None or uses.get(name) != 1 or call.keywords or len(call.args) != len(params) or fn is holder:
                out.append(s)
                continue
            size = sum(_size(t) for t in fn.body)
            if size > budget:
                out.append(s)
                continue
            budget -= size
            out += _put_back(s, fn, call.args, gone)
            gone.add(id(fn))
        body[:] = out
    _number(tree)
    return gone


def _expanded(tree: ast.AST, defs: dict[str, tuple[ast.FunctionDef, int]], calls: dict[str, list[ast.Call]]):
    """Each call of a function that returns one expression (and calls none of the file's) replaced by that
    expression of its arguments, where the copies, all told, add at most COPIES nodes (red team 103: `self.rows(i)`
    for the master's `rows = (i * Br, min((i + 1) * Br, N))`, 0.72 with a class); the ids of their definitions."""
    found, budget = {}, COPIES
    for name, (fn, skip) in defs.items():
        value = fn.body[0].value if len(fn.body) == 1 and isinstance(fn.body[0], ast.Return) else None
        if value is None or len(calls.get(name, [])) < 2 or len(calls[name]) > budget:
            continue
        params = [a.arg for a in fn.args.args[skip:]]
        given = [c.args for c in calls[name]]
        if any(len(a) != len(params) or any(isinstance(x, ast.Starred) for x in a) for a in given):
            continue
        inside = list(ast.walk(value))
        reads = [sum(isinstance(n, ast.Name) and n.id == p for n in inside) for p in params]
        cost = sum(len(inside) + sum(r * _size(x) for r, x in zip(reads, a, strict=True)) for a in given)
        keywords = any(c.keywords for c in calls[name])
        if not keywords and cost <= budget and not any(isinstance(n, ast.Name) and n.id in defs for n in inside):
            found[name], budget = (value, params), budget - cost
    if found:
        _Expand(found).visit(tree)
    return {id(defs[name][0]) for name in found}


def _size(node: ast.AST) -> int:
    return sum(1 for _ in ast.walk(node))


class _Expand(ast.NodeTransformer):
    """Each call of a function of `found` as its expression, its parameters read as the call's arguments."""

    def __init__(self, found: dict[str, tuple[ast.expr, list[str]]]):
        self.found = found

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id in self.found):
            return node
        value, params = self.found[node.func.id]
        given = dict(zip(params, node.args, strict=True))

        def put(read: ast.Name) -> ast.expr:
            return copy.deepcopy(given[read.id]) if read.id in given else read

        holder = ast.Expr(value=copy.deepcopy(value))
        reads_replaced(holder, put)
        return ast.copy_location(holder.value, node)


def _methods_only(c: ast.ClassDef) -> bool:
    """A class of plain methods only (and a docstring), no base, no decorator."""
    kept = [s for s in c.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    plain = all(isinstance(s, ast.FunctionDef) and _plain(s) and s.args.args and not s.decorator_list for s in kept)
    return plain and not c.bases and not c.keywords and not c.decorator_list


def _made(call: ast.expr | None, classes: dict[str, ast.ClassDef], uses: dict[str, int]):
    """[(__init__, its arguments), (m, its arguments)] where `call` is `C(a).m(b)`, C a class of `classes` named
    nowhere else (red team 103: `Attention(chip, Br, Bc, scale).run()`, 0.72), else None."""
    method = call.func if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None
    made = method.value if method is not None else None
    if not (isinstance(made, ast.Call) and isinstance(made.func, ast.Name) and made.func.id in classes):
        return None
    if uses.get(made.func.id) != 1 or call.keywords or made.keywords:
        return None
    methods = {f.name: f for f in classes[made.func.id].body if isinstance(f, ast.FunctionDef)}
    found = [(methods.get("__init__"), made.args), (methods.get(method.attr), call.args)]
    if found[1][0] is None or (found[0][0] is None and made.args):
        return None
    found = [(fn, args) for fn, args in found if fn is not None]
    return found if all(len(fn.args.args) == len(args) + 1 for fn, args in found) else None


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


def _put_back(s: ast.Assign | ast.Expr | ast.Return | None, fn: ast.FunctionDef, args: list, gone: set[int]) -> list:
    """`fn`'s body where `s` calls it with `args`: its parameters (less an object's) assigned them, then its body
    but the functions already put back (`gone`), then `s`'s targets assigned what it returns, or it returned
    (nothing where `s` is None)."""
    params = [a.arg for a in fn.args.args[len(fn.args.args) - len(args) :]]
    body = copy.deepcopy([t for t in fn.body if id(t) not in gone])
    returned = body.pop().value if body and isinstance(body[-1], ast.Return) else None
    given = [ast.Assign(targets=[ast.Name(id=p, ctx=ast.Store())], value=a) for p, a in zip(params, args, strict=True)]
    if isinstance(s, ast.Assign) and returned is not None:
        body.append(ast.Assign(targets=s.targets, value=returned))
    elif isinstance(s, ast.Expr | ast.Return) and returned is not None:
        body.append(type(s)(value=returned))
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
