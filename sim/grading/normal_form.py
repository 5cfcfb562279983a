"""One way to write a program, for the similarity report: parsed and printed back (one statement a line, one way to
write each expression), with what a mechanical rewrite adds to hide a copy taken out. A compound statement becomes
its header's work, then its bodies' statements (`if True:`, `for _ in range(1):`, `try` around each line vanish:
red team 86; `for x in [e]: pass` is `x = e`: 89); statements that compute nothing go (`pass`, an expression that
calls nothing: red team 85's lone `_` after every line; imports, `global`, `del`, `assert`, bare annotations: 86;
calls of idle builtins, `len(())`: 88); an assignment and an expression have one spelling (`(x := e)`, `[x] = [e]`,
`x: T = e`, `getattr(a, "b")`: 89; `b * a`, `a + -b`, `b > a`: 91); then assignments to names nothing reads go
(`_ = 0` after every line). What is left is the straight-line code a person would call the same program; it need
not run."""

import ast

COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)
TRY_STAR = tuple(getattr(ast, n) for n in ("TryStar",) if hasattr(ast, n))  # Python 3.11's `except*`
EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
STORES = (ast.Assign, ast.AugAssign)
IDLE = frozenset(
    """abs all any ascii bin bool callable chr dict divmod float format frozenset hash hex id int isinstance
    issubclass iter len list max min oct ord pow print range repr round set sorted str sum tuple type memoryview bytes
    bytearray enumerate zip reversed slice complex object map filter""".split()
)
ASSERTIONS = frozenset(("static_assert", "static_print", "device_assert", "device_print"))
NOTHING = (ast.Pass, ast.Break, ast.Continue, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Delete,
           ast.Assert)  # fmt: skip


def normalized(source: str) -> str:
    """`source` in its normal form, or `source` itself where it does not parse (then it does not run either)."""
    try:
        tree = ast.parse(source)
        tree = _Spelled().visit(tree)
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


class _Spelled(ast.NodeTransformer):
    """One spelling of an expression: `getattr(a, "b")` as `a.b` (red team 89: 0.18 against its original); `a + -b`
    as `a - b`, the operands of `+` and `*` in one order, `b > a` as `a < b` (red team 91: 0.75)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Add):
            for x, y in ((node.left, node.right), (node.right, node.left)):
                if isinstance(y, ast.UnaryOp) and isinstance(y.op, ast.USub):
                    return ast.BinOp(left=x, op=ast.Sub(), right=y.operand)
        if isinstance(node.op, ast.Add | ast.Mult) and ast.dump(node.right) < ast.dump(node.left):
            node.left, node.right = node.right, node.left
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        flipped = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}.get(type(node.ops[0])) if len(node.ops) == 1 else None
        if flipped is not None:
            return ast.Compare(left=node.comparators[0], ops=[flipped()], comparators=[node.left])
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        name = node.args[1] if len(node.args) == 2 and not node.keywords else None
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and isinstance(name, ast.Constant):
            if isinstance(name.value, str) and name.value.isidentifier():
                return ast.Attribute(value=node.args[0], attr=name.value, ctx=ast.Load())
        return node


def _flatten(tree: ast.AST) -> None:
    """Each compound statement replaced by its header's work, then the statements of its bodies, in order."""
    for node in ast.walk(tree):
        if _holds_body(node):
            node.body = _straight(node.body)


def _straight(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in body:
        if isinstance(s, COMPOUND + TRY_STAR):
            parts = [_header(s), getattr(s, "body", []), getattr(s, "orelse", []), getattr(s, "finalbody", [])]
            parts += [h.body for h in getattr(s, "handlers", []) if not _reraises(h)]
            parts += [c.body for c in getattr(s, "cases", [])]
            out += _straight([t for part in parts for t in part])
        else:
            out += _plain(s)
    return out


def _header(s: ast.stmt) -> list[ast.stmt]:
    """What a compound statement's header computes, as statements: `for x in it` is `x = it` (`x = e` for a list of
    one: red team 89's `for x in [e]: pass` held the whole program), `with e as x` is `x = e`, a test or a match's
    subject an expression statement (inert where it computes nothing: `if True:`)."""
    if isinstance(s, ast.For | ast.AsyncFor):
        one = isinstance(s.iter, ast.List | ast.Tuple) and len(s.iter.elts) == 1
        return [ast.Assign(targets=[s.target], value=s.iter.elts[0] if one else s.iter, lineno=0)]
    if isinstance(s, ast.With | ast.AsyncWith):
        return [ast.Assign(targets=[i.optional_vars], value=i.context_expr, lineno=0) if i.optional_vars
                else ast.Expr(i.context_expr) for i in s.items]  # fmt: skip
    test = getattr(s, "test", None) or getattr(s, "subject", None)
    return [ast.Expr(test)] if test is not None else []


def _plain(s: ast.stmt) -> list[ast.stmt]:
    """One way to write an assignment: `x: T = v`, `(x := v)` and `[x, y] = [v, w]` as `x = v` (and `y = w`)."""
    if isinstance(s, ast.AnnAssign) and s.value is not None:
        return [ast.Assign(targets=[s.target], value=s.value, lineno=0)]
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.NamedExpr):
        return [ast.Assign(targets=[s.value.target], value=s.value.value, lineno=0)]
    pair = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else None
    sequences = ast.List | ast.Tuple
    if isinstance(pair, sequences) and isinstance(s.value, sequences) and len(pair.elts) == len(s.value.elts):
        if not any(isinstance(e, ast.Starred) for e in (*pair.elts, *s.value.elts)):
            return [ast.Assign(targets=[t], value=v, lineno=0) for t, v in zip(pair.elts, s.value.elts, strict=True)]
    return [s]


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


def _pure(node: ast.AST) -> bool:
    """Computes without effects: no await, yield or walrus, no call but of IDLE builtins (`_ = range(1)`)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in IDLE):
            return False
        if isinstance(n, EFFECTS) and not isinstance(n, ast.Call):
            return False
    return True


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
        if isinstance(s, STORES) and all(isinstance(t, ast.Name) for t in _targets(s)) and _pure(s)
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
