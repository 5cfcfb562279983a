"""One way to write a program, for the similarity report: parsed and printed back (one statement a line, one way to
write each expression), with what a mechanical rewrite adds to hide a copy taken out — control statements' headers
(`if True:`, `for _ in range(1):`, `while True: … break`, `with`, `try` around each statement: red team 86's
lead), statements that compute nothing (`pass`, an expression that calls nothing: red team 85's lone `_` after
every line; imports, `global`, `del`, `assert`, a bare annotation `x: int`: red team 86's padding), annotations
(`x: int = v` is `x = v`) and assignments to names nothing reads (`_ = 0` after every line). What is left is the
straight-line code a person would call the same program; it need not run."""

import ast

COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)
TRY_STAR = tuple(getattr(ast, n) for n in ("TryStar",) if hasattr(ast, n))  # Python 3.11's `except*`
EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
STORES = (ast.Assign, ast.AugAssign)
IDLE = frozenset(
    """abs all any ascii bin bool callable chr dict divmod float format frozenset hash hex id int isinstance
    issubclass iter len list max min oct ord pow print range repr round set sorted str sum tuple type""".split()
)
ASSERTIONS = frozenset(("static_assert", "static_print", "device_assert", "device_print"))
NOTHING = (ast.Pass, ast.Break, ast.Continue, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Delete,
           ast.Assert)  # fmt: skip


def normalized(source: str) -> str:
    """`source` in its normal form, or `source` itself where it does not parse (then it does not run either)."""
    try:
        tree = ast.parse(source)
        _flatten(tree)
        _keep(tree, lambda s: not _inert(s))
        dead = _dead_stores(tree)  # (after the inert ones went: `del _` and a lone `_` read `_`)
        _keep(tree, lambda s: id(s) not in dead)
        return ast.unparse(tree)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return source


def _holds_body(node: ast.AST) -> bool:
    return isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))


def _keep(tree: ast.AST, keep) -> None:
    """Only the statements `keep` takes, in every body."""
    for node in ast.walk(tree):
        if _holds_body(node):
            node.body = [s for s in node.body if keep(s)] or [ast.Pass()]


def _flatten(tree: ast.AST) -> None:
    """Each compound statement replaced by the statements of its bodies, in order (its header dropped)."""
    for node in ast.walk(tree):
        if _holds_body(node):
            node.body = _straight(node.body)


def _straight(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in body:
        if isinstance(s, COMPOUND + TRY_STAR):
            parts = [getattr(s, "body", []), getattr(s, "orelse", []), getattr(s, "finalbody", [])]
            parts += [h.body for h in getattr(s, "handlers", []) if not _reraises(h)]
            parts += [c.body for c in getattr(s, "cases", [])]
            out += _straight([t for part in parts for t in part])
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            out.append(ast.Assign(targets=[s.target], value=s.value, lineno=s.lineno))
        else:
            out.append(s)
    return out


def _reraises(h: ast.ExceptHandler) -> bool:
    """`except …: raise` (or `raise e`, e the exception caught): a handler that changes nothing."""
    (only, *more) = h.body
    caught = isinstance(only, ast.Raise) and only.cause is None and isinstance(only.exc, (ast.Name, type(None)))
    return not more and caught and (only.exc is None or only.exc.id == h.name)


def _inert(s: ast.stmt) -> bool:
    """One of NOTHING, a bare annotation, `x = x`, or an expression statement that calls, awaits, yields and assigns
    nothing — or whose call is of a builtin that changes nothing (`len(())`, `print(x)`) or an assertion
    (`tl.static_assert(True)`: red team 88's padding), on arguments that call nothing."""
    if isinstance(s, NOTHING) or (isinstance(s, ast.AnnAssign) and s.value is None):
        return True
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Name):
        return isinstance(s.targets[0], ast.Name) and s.targets[0].id == s.value.id
    if not isinstance(s, ast.Expr):
        return False
    call = s.value
    if isinstance(call, ast.Call) and _idle(call.func):
        return not any(isinstance(n, EFFECTS) for a in (*call.args, *call.keywords) for n in ast.walk(a))
    return not any(isinstance(n, EFFECTS) for n in ast.walk(s))


def _idle(func: ast.expr) -> bool:
    """A builtin whose result is all it does (its statement drops it), or an assertion or print of Triton's."""
    if isinstance(func, ast.Name):
        return func.id in IDLE
    return isinstance(func, ast.Attribute) and func.attr in ASSERTIONS


def _dead_stores(tree: ast.AST) -> set[int]:
    """The ids of assignments, without effects, to plain names that no live statement reads (names taken by
    spelling alone, scopes ignored: a name read anywhere keeps every assignment to it)."""
    stores = [
        s
        for s in ast.walk(tree)
        if isinstance(s, STORES)
        and all(isinstance(t, ast.Name) for t in _targets(s))
        and not any(isinstance(n, EFFECTS) for n in ast.walk(s))
    ]
    inside = {id(n) for s in stores for n in ast.walk(s)}
    live_names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in inside and _reads(n)}
    assigning: dict[str, list[ast.stmt]] = {}
    for s in stores:
        for t in _targets(s):
            assigning.setdefault(t.id, []).append(s)
    dead = {id(s) for s in stores}
    todo = list(live_names)
    while todo:  # a store is live once a live statement reads what it assigns; then so are its own reads
        for s in assigning.pop(todo.pop(), []):
            if id(s) in dead:
                dead.discard(id(s))
                todo += [n.id for n in ast.walk(s) if isinstance(n, ast.Name) and _reads(n)]
    return dead


def _targets(s: ast.stmt) -> list[ast.expr]:
    if isinstance(s, ast.Assign):
        return [e for t in s.targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    return [s.target]


def _reads(n: ast.Name) -> bool:
    return isinstance(n.ctx, ast.Load)
