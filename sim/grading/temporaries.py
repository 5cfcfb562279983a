"""Temporaries put back where they are read, for the similarity report's normal form (`normal_form`).

Red team 94 hid copies by binding a receiver once (`load = chip.load`, then `load(…)`: 0.50 against
the original), holding every argument in a temporary first (`KT = K_j.T`, then `chip.matmul(Q_i, KT)`:
0.60) and keeping an offset for two loads (0.65). In each function (and the module), a name it binds
once, by an assignment that is no loop's header, and reads only after it, is replaced by its value
where the value is a name or an attribute of one, where it is read once, or where it is pure and SMALL
as written (and not ten times that with the temporaries in it put back); the assignment goes.
"""

import ast
import copy

from sim.grading.tree_edits import reads_replaced

SMALL = 30  # nodes: a temporary this small as written and pure is put back wherever it is read
DEEP = 40  # levels: no expression is made deeper than this by putting temporaries back (the printer recurses)
COPIES = 3000  # nodes the copies of one temporary may add, read more than once
ALIAS_COPIES = 20_000  # and of an alias (red team 100: a chain of 95 attributes read 32,000 times)
LOOP = "flashsim_loop"  # marks the assignment a loop's header became (`normal_form`): no temporary
SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def put_back(tree: ast.AST, pure) -> set[int]:
    """The temporaries of every scope of `tree` put back (`pure`: whether an expression computes without effects);
    the ids of the assignments that bound them (to go)."""
    gone = _module_constants(tree)
    for scope in ast.walk(tree):
        if isinstance(scope, SCOPES) and not isinstance(scope, ast.Lambda):
            gone |= _put_back_in(scope, pure)
    return gone


def _module_constants(tree: ast.AST) -> set[int]:
    """Names the module binds once, to a constant, put back wherever the file reads them, in any function
    (`_C3 = 'K_j'` then `chip.load(_C3, …)`: red team 102, 0.59); the ids of their assignments."""
    binds: dict[str, int] = {}
    for n in ast.walk(tree):
        name = n.id if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) else getattr(n, "arg", None)
        name = name or (n.name if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else None)
        if isinstance(name, str):
            binds[name] = binds.get(name, 0) + 1
    constants = {s.targets[0].id: s for s in getattr(tree, "body", []) if isinstance(s, ast.Assign)
                 and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                 and isinstance(s.value, ast.Constant) and binds.get(s.targets[0].id) == 1}  # fmt: skip

    def put(read: ast.Name) -> ast.expr:
        if read.id not in constants:
            return read
        return ast.copy_location(ast.Constant(value=constants[read.id].value.value), read)

    reads_replaced(tree, put)
    return {id(s) for s in constants.values()}


def _put_back_in(scope: ast.AST, pure) -> set[int]:
    bound: dict[str, list[ast.AST]] = {}
    read: dict[str, list[ast.Name]] = {}
    stack, assignments = list(ast.iter_child_nodes(scope)), []
    while stack:  # the scope's own nodes: not those of the functions, classes and lambdas inside it
        n = stack.pop()
        if isinstance(n, ast.Name):
            (read if isinstance(n.ctx, ast.Load) else bound).setdefault(n.id, []).append(n)
        elif isinstance(n, ast.arg):
            bound.setdefault(n.arg, []).append(n)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.setdefault(n.name, []).append(n)
        assignments += [n] if isinstance(n, ast.Assign) else []
        stack += [] if isinstance(n, SCOPES) else list(ast.iter_child_nodes(n))
    plain = {id(s.targets[0]): s for s in assignments if len(s.targets) == 1 and not getattr(s, LOOP, False)}
    resolved, gone = _aliases(bound, plain, read)
    candidates = [s for s in plain.values() if isinstance(s.targets[0], ast.Name)
                  and bound[s.targets[0].id] == [s.targets[0]] and s.targets[0].id in read]  # fmt: skip
    candidates.sort(key=lambda s: (s.targets[0].lineno, s.targets[0].col_offset))
    putting = _PutBack(resolved)
    for s in candidates:
        written = _size(s.value)
        s.value = putting.visit(s.value)  # the temporaries before it, in it first
        target, own = s.targets[0], {id(n) for n in ast.walk(s)}
        reads = read[target.id]
        where = [(getattr(r, "lineno", 0), getattr(r, "col_offset", 0)) for r in reads]  # (a node made: none)
        if any(id(r) in own or at < (target.lineno, target.col_offset) for r, at in zip(reads, where, strict=True)):
            continue  # read by itself or before it (a loop's previous turn)
        first, last = target.lineno, max(line for line, _ in where)  # (a bind on the read's own line is its own
        uses = {n.id for n in ast.walk(s.value) if isinstance(n, ast.Name)}  # statement's: stored after it is read)
        if any(first < getattr(b, "lineno", 0) < last for u in uses for b in bound.get(u, [])):
            continue  # what it reads is bound again before it is read: put back, it would read the new value
        size = _size(s.value)
        small = written <= SMALL and size <= 10 * SMALL and pure(s.value)  # (x + x, twice: 4x)
        copies = size * (len(reads) - 1)  # (red team 98: 280 nodes read 3,000 times took the read past 10 s)
        if _depth(s.value) <= DEEP and copies <= COPIES and (_dotted(s.value) or len(reads) == 1 or small):
            resolved[target.id] = (s.value, len(reads) > 1)
            gone.add(id(s))
    body = getattr(scope, "body", [])
    body[:] = [putting.visit(statement) for statement in body]
    return gone


def _aliases(bound: dict[str, list[ast.AST]], plain: dict[int, ast.Assign], read: dict[str, list[ast.Name]]):
    """The names a scope binds only to one name or attribute (`load = chip.load`, twice too), or to a function that
    only forwards its arguments to one (`def load(*a, **k): return chip.load(*a, **k)`): red team 98, 0.50 and 0.46;
    and the statements that bind them."""
    resolved: dict[str, tuple[ast.expr, bool]] = {}
    gone: set[int] = set()
    for name, nodes in bound.items():
        binds = [plain.get(id(n)) if isinstance(n, ast.Name) else n for n in nodes]
        values = [_forwarded(b) if isinstance(b, ast.FunctionDef) else getattr(b, "value", None) for b in binds]
        values = [_forwarded(v) if isinstance(v, ast.Lambda) else v for v in values]  # `f = lambda *a: g(*a)`
        if not all(v is not None and _dotted(v) for v in values) or len({ast.dump(v) for v in values}) != 1:
            continue
        root = _root(values[0])  # bound again, it would change under the alias (red team 100: m_old = m_i)
        if len(bound.get(root, [])) <= 1 and _size(values[0]) * len(read.get(name, [])) <= ALIAS_COPIES:
            resolved[name] = (values[0], True)
            gone |= {id(b) for b in binds}
    for name, (value, _) in list(resolved.items()):  # a wrapper of a wrapper: the last callee (red team 100)
        seen = {name}
        while isinstance(value, ast.Name) and value.id in resolved and value.id not in seen:
            seen.add(value.id)
            value = resolved[value.id][0]
        resolved[name] = (value, True)
    return resolved, gone


def _forwarded(fn: ast.FunctionDef | ast.Lambda) -> ast.expr | None:
    """The callee a function (or lambda) does nothing but call with its own arguments, as it was given them."""
    a, body = fn.args, fn.body if isinstance(fn, ast.FunctionDef) else [ast.Return(fn.body)]
    if getattr(fn, "decorator_list", []) or a.kwonlyargs or a.defaults or len(body) != 1:
        return None
    call = body[0].value if isinstance(body[0], ast.Return) else None
    if not isinstance(call, ast.Call):
        return None
    names = [p.arg for p in (*a.posonlyargs, *a.args)] + ([f"*{a.vararg.arg}"] if a.vararg else [])
    given = [f"*{x.value.id}" if isinstance(x, ast.Starred) and isinstance(x.value, ast.Name)
             else getattr(x, "id", None) for x in call.args]  # fmt: skip
    keywords = [(k.arg, getattr(k.value, "id", None)) for k in call.keywords]
    return call.func if given == names and keywords == ([(None, a.kwarg.arg)] if a.kwarg else []) else None


class _PutBack(ast.NodeTransformer):
    """Each read of a resolved name replaced by its value (a copy where it is read more than once), in one scope."""

    def __init__(self, resolved: dict[str, tuple[ast.expr, bool]]):
        self.resolved = resolved

    def visit_FunctionDef(self, node: ast.AST) -> ast.AST:
        return node  # a scope of its own

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if not isinstance(node.ctx, ast.Load) or node.id not in self.resolved:
            return node
        value, many = self.resolved[node.id]
        return copy.deepcopy(value) if many else value


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _dotted(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _depth(node: ast.AST) -> int:
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, level = stack.pop()
        deepest = max(deepest, level)
        stack += [(c, level + 1) for c in ast.iter_child_nodes(n)]
    return deepest


def _size(node: ast.AST) -> int:
    return sum(1 for _ in ast.walk(node))
