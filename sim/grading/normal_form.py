"""One way to write a program, for the similarity report: parsed and printed back (one statement a line, one way to
write each expression), with what a mechanical rewrite adds to hide a copy taken out. A loop written as a function
recursing on its index, a counted `while`, a loop over a generator and a loop unrolled are each a `for` first
(`recursion`, `loop_forms`: red team 103). A compound statement becomes its header's work, then its bodies' statements (`if True:`, `for _ in range(1):`, `try` around each line vanish:
red team 86; `for x in [e]: pass` is `x = e`: 89); statements that compute nothing go (`pass`, an expression that
calls nothing: red team 85's lone `_` after every line; imports, `global`, `del`, `assert`, bare annotations: 86;
calls of idle builtins, `len(())`: 88); an assignment and an expression have one spelling (`(x := e)`, `[x] = [e]`,
`x: T = e`, `getattr(a, "b")`: 89; `b * a`, `a + -b`, `b > a`: 91; keywords, numpy's functions as methods: 94, in
`spelling`); calls of numpy's, math's and Triton's functions whose result is dropped go (`np.float32(0)` after
every line: 94); temporaries are put back where they are read (`temporaries`: 94); then assignments to names
nothing reads go (`_ = 0` after every line). What is left is the straight-line code a person would call the same
program; it need not run."""

import ast

from sim.grading.inlining import inlined
from sim.grading.loop_forms import reshaped, unnested
from sim.grading.namespaces import unpacked
from sim.grading.purity import PURE_FUNCTION, PURE_MODULES, pure, pure_functions
from sim.grading.recursion import unwound
from sim.grading.spelling import Spelled
from sim.grading.temporaries import LOOP, put_back
from sim.grading.tree_edits import reads_replaced, replace

COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)
TRY_STAR = tuple(getattr(ast, n) for n in ("TryStar",) if hasattr(ast, n))  # Python 3.11's `except*`
STORES = (ast.Assign, ast.AugAssign)
NOTHING = (ast.Pass, ast.Break, ast.Continue, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Delete,
           ast.Assert)  # fmt: skip
DEEPEST = 100  # levels of an expression the rewrites take (each level is a few of Python's 1,000 frames)


def normalized(source: str) -> str:
    """`source` in its normal form, or `source` itself where it does not parse (then it does not run either); what
    else stops the rewrites (blocks nested past the recursion limit) is raised, and `code_reading` says so."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return source
    _shallow(tree)
    modules = _imported(tree)
    tree = Spelled(modules).visit(tree)
    modules |= dict.fromkeys(pure_functions(tree, modules), PURE_FUNCTION)
    unwound(tree)  # a function recursing on an index as its loop, then loops in one shape (red team 103)
    reshaped(tree)
    _flatten(tree)
    made = unpacked(tree) | inlined(tree)  # locals kept in an object or a dict; functions called once (102, 103)
    _keep(tree, lambda s: id(s) not in made and not _inert(s, modules))
    gone = put_back(tree, lambda node: pure(node, modules))
    _keep(tree, lambda s: id(s) not in gone)
    tree = Spelled(modules).visit(tree)  # again: a temporary put back is an operand to order
    dead = _dead_stores(tree, modules)  # (after the inert ones went: `del _` and a lone `_` read `_`)
    _keep(tree, lambda s: id(s) not in dead)
    return ast.unparse(Formatted().visit(tree))


class Formatted(ast.NodeTransformer):
    """An f-string as a call of its parts, `f"a{x!r:>4}"` as `f('a', x)`: Python 3.11 cannot write back one whose
    expression part gained a string holding a backslash (a temporary put back there), and the file went unjudged
    (helper 115: 5 files; `found = "\\"` read in `f"{found!r}"`)."""

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.Call:
        parts = [self.visit(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return ast.Call(func=ast.Name(id="f", ctx=ast.Load()), args=parts, keywords=[])


def _shallow(tree: ast.AST) -> None:
    """Every expression more than DEEPEST levels deep replaced by None (red team 98: one line `_ = 0 + 0 + …` of
    500 terms ran the rewrites past Python's recursion limit, and the file was compared as written: 0.35 against
    itself). No program that computes anything of its own holds one; the line padding a copy becomes inert."""
    parents, order, stack = {}, [], [tree]
    while stack:  # top down, then heights bottom up
        node = stack.pop()
        order.append(node)
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            stack.append(child)
    height: dict[int, int] = {}
    for node in reversed(order):
        height[id(node)] = 1 + max((height[id(c)] for c in ast.iter_child_nodes(node)), default=0)
    for node in order:
        parent = parents.get(id(node))
        if isinstance(node, ast.expr) and height[id(node)] > DEEPEST and not isinstance(parent, ast.expr):
            replace(node, parent, ast.Constant(value=None))


def _holds_body(node: ast.AST) -> bool:
    return isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))


def _keep(tree: ast.AST, keep) -> None:
    """Only the statements `keep` takes, in every body."""
    for node in ast.walk(tree):
        if _holds_body(node):
            node.body = [s for s in node.body if keep(s)] or [ast.Pass()]


def _flatten(tree: ast.AST) -> None:
    """Each compound statement replaced by its header's work, then the statements of its bodies, in order."""
    for node in ast.walk(tree):
        if _holds_body(node):
            node.body = _straight(node.body)


def _straight(body: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in body:
        s = unnested(_looped_comprehension(s))
        if isinstance(s, COMPOUND + TRY_STAR):
            parts = [_header(s), getattr(s, "body", []), getattr(s, "orelse", []), getattr(s, "finalbody", [])]
            parts += [h.body for h in getattr(s, "handlers", []) if not _reraises(h)]
            parts += [c.body for c in getattr(s, "cases", [])]
            out += _straight([t for part in parts for t in part])
        else:
            out += _plain(s)
    return out


def _looped_comprehension(s: ast.stmt) -> ast.stmt:
    """A comprehension standing as a statement (its list dropped) as the loops it is: `[f(x) for x in xs]` is
    `for x in xs: f(x)` (red team 103: a loop written so, among others: 0.66)."""
    comp = s.value if isinstance(s, ast.Expr) else None
    if not isinstance(comp, ast.ListComp | ast.SetComp | ast.GeneratorExp):
        return s
    inner: ast.stmt = ast.Expr(value=comp.elt)
    for g in reversed(comp.generators):
        for test in reversed(g.ifs):
            inner = ast.If(test=test, body=[inner], orelse=[])
        inner = ast.For(target=g.target, iter=g.iter, body=[inner], orelse=[], lineno=0)
    return inner


def _header(s: ast.stmt) -> list[ast.stmt]:
    """What a compound statement's header computes, as statements: `for x in it` is `x = it` (`x = e` for a list of
    one: red team 89's `for x in [e]: pass` held the whole program), `with e as x` is `x = e`, a test or a match's
    subject an expression statement (inert where it computes nothing: `if True:`)."""
    if isinstance(s, ast.For | ast.AsyncFor):
        one = isinstance(s.iter, ast.List | ast.Tuple) and len(s.iter.elts) == 1
        return [ast.Assign(targets=[s.target], value=s.iter.elts[0], lineno=0) if one else _looped(s)]
    if isinstance(s, ast.With | ast.AsyncWith):
        return [ast.Assign(targets=[i.optional_vars], value=i.context_expr, lineno=0) if i.optional_vars
                else ast.Expr(i.context_expr) for i in s.items]  # fmt: skip
    test = getattr(s, "test", None) or getattr(s, "subject", None)
    return [ast.Expr(test)] if test is not None else []


def _looped(s: ast.For | ast.AsyncFor) -> ast.Assign:
    """A loop's `x = it`, marked: its variable is no temporary to put back (a `while` would keep it)."""
    assign = ast.Assign(targets=[s.target], value=s.iter, lineno=0)
    setattr(assign, LOOP, True)
    return assign


def _plain(s: ast.stmt) -> list[ast.stmt]:
    """One way to write an assignment: `x: T = v`, `(x := v)` and `[x, y] = [v, w]` as `x = v` (and `y = w`)."""
    if isinstance(s, ast.AnnAssign) and s.value is not None:
        return [ast.Assign(targets=[s.target], value=s.value, lineno=0)]
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.NamedExpr):
        return [ast.Assign(targets=[s.value.target], value=s.value.value, lineno=0)]
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Tuple | ast.List):  # `(f(a), g(b))`: f(a), then g(b)
        return [t for e in s.value.elts for t in _plain(ast.Expr(value=e))]
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


def _inert(s: ast.stmt, modules: dict[str, str]) -> bool:
    """One of NOTHING, a bare annotation, `x = x`, a function that returns no more than a constant (a `nop` whose
    calls go too: red team 100), or an expression statement that is `purity.pure`: it calls nothing, or only
    builtins that change nothing (`len(())`, `print(x)`), assertions (`tl.static_assert(True)`: red team 88's
    padding) and functions of PURE_MODULES (`np.float32(0)` after every line: red team 94, 0.52)."""
    if isinstance(s, NOTHING) or (isinstance(s, ast.AnnAssign) and s.value is None):
        return True
    if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and modules.get(s.name) == PURE_FUNCTION:
        return all(isinstance(t, ast.Pass) or (isinstance(t, ast.Return | ast.Expr) and
                   isinstance(t.value, ast.Constant | type(None))) for t in s.body)  # fmt: skip
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Name):
        return isinstance(s.targets[0], ast.Name) and s.targets[0].id == s.value.id
    return isinstance(s, ast.Expr) and pure(s.value, modules)


def _imported(tree: ast.AST) -> dict[str, str]:
    """Each module's name as the file binds it → the module (`np` → numpy). A name imported from one of
    PURE_MODULES is written as the module's attribute (`from numpy import exp`'s `exp` as `numpy.exp`: red team 94,
    0.70 with keyword arguments), where the file binds it nowhere else."""
    modules, names = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                        for a in node.names}  # fmt: skip
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                whole = f"{node.module}.{a.name}"
                if whole in PURE_MODULES:  # `from triton import language as tl`: a module
                    modules[a.asname or a.name] = whole
                elif node.module.split(".")[0] in {m.split(".")[0] for m in PURE_MODULES} and a.name != "*":
                    names[a.asname or a.name] = (node.module, a.name)
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    names = {k: v for k, v in names.items() if k not in bound and k not in modules}
    reads_replaced(tree, lambda read: _attribute(read, *names[read.id]) if read.id in names else read)
    return modules | {module.split(".")[0]: module.split(".")[0] for module, _ in names.values()}


def _attribute(where: ast.Name, module: str, name: str) -> ast.expr:
    """`module.name` as an expression (`numpy.exp`), at `where`'s place in the file (red team 98: a Name without one
    stopped the normal form)."""
    root, *rest = module.split(".")
    node: ast.expr = ast.copy_location(ast.Name(id=root, ctx=ast.Load()), where)
    for part in (*rest, name):
        node = ast.copy_location(ast.Attribute(value=node, attr=part, ctx=ast.Load()), where)
    return node


def _dead_stores(tree: ast.AST, modules: dict[str, str]) -> set[int]:
    """The ids of assignments, without effects, to plain names that no live statement reads (names taken by
    spelling alone, scopes ignored: a name read anywhere keeps every assignment to it)."""
    stores = [
        s
        for s in ast.walk(tree)
        if isinstance(s, STORES) and all(isinstance(t, ast.Name) for t in _targets(s)) and pure(s, modules)
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
