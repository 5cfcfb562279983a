"""Loops written another way put back in one shape, a `for` over its values, for the similarity report's normal form.

Red team 103 hid copies of a master by reshaping its loops: a counter (`i = 0`, `while i < n: …; i += 1`: 0.80
with a class around it), a loop over a generator of its values (`for rows in ((i * Br, …) for i in range(Tr))`:
0.73 with others), and a loop unrolled by two (`for i in range(0, Tr - 1, 2)`, the body twice, the second for
`i + 1`, then an `if Tr % 2:` for the last block: 0.76). A counted `while` whose counter nothing else changes or reads
afterwards becomes `for i in range(a, b, s)`; `for x in (e for i in it)` becomes `for i in it: x = e`; a loop over
`range(a, b, k)` (k ≤ UNROLLED) whose body is k copies of one, differing only in expressions of its variable, keeps
one copy over `range(a, b)`, and drops an `if` right after it whose body is that copy too (its last turn).
"""

import ast

UNROLLED = 8  # copies of a body a loop may hold to be folded back into one


def reshaped(tree: ast.AST) -> None:
    """Every counted `while` and unrolled `for` of `tree` as a plain `for` (innermost first)."""
    lists = [(node, field) for node in ast.walk(tree) for field in ("body", "orelse", "finalbody")
             if isinstance(getattr(node, field, None), list) and getattr(node, field)
             and isinstance(getattr(node, field)[0], ast.stmt)]  # fmt: skip
    for node, field in reversed(lists):
        body = getattr(node, field)
        body[:] = _folded(_counted(body))


def unnested(s: ast.stmt) -> ast.stmt:
    """`for x in (e for i in it if c)` as `for i in it: if c: x = e; …` (one loop per generator)."""
    comp = s.iter if isinstance(s, ast.For) and not s.orelse else None
    if not isinstance(comp, ast.GeneratorExp | ast.ListComp) or not comp.generators:
        return s
    inner: list[ast.stmt] = [ast.Assign(targets=[s.target], value=comp.elt, lineno=0), *s.body]
    for g in reversed(comp.generators):
        for test in reversed(g.ifs):
            inner = [ast.If(test=test, body=inner, orelse=[])]
        inner = [ast.For(target=g.target, iter=g.iter, body=inner, orelse=[], lineno=0)]
    return inner[0]


def _counted(body: list[ast.stmt]) -> list[ast.stmt]:
    """`x = a; while x < b: …; x += s; …` as `for x in range(a, b, s): …`, where the body changes neither x (but by
    its increment), nor b, nor s, reads x after the increment and has no `continue`, and x is not read after the
    loop before it is assigned again."""
    read_after = _read_after(body)
    out: list[ast.stmt] = []
    for k, s in enumerate(body):
        loop = None if k in read_after else _counter_loop(out[-1] if out else None, s)
        if loop is None:
            out.append(s)
        else:
            out[-1] = loop
    return out


def _counter(s: ast.stmt) -> str:
    test = s.test if isinstance(s, ast.While) else None
    left = test.left if isinstance(test, ast.Compare) else None
    return left.id if isinstance(left, ast.Name) else ""


def _read_after(body: list[ast.stmt]) -> set[int]:
    """The indices of the `while` statements whose counter is read after them before it is assigned again."""
    out: set[int] = set()
    last: dict[str, str] = {}  # name → "read" or "assigned", whichever comes first after the statement looked at
    for k in range(len(body) - 1, -1, -1):
        s = body[k]
        if last.get(_counter(s)) == "read":
            out.add(k)
        if isinstance(s, ast.Assign):
            last |= {t.id: "assigned" for t in s.targets if isinstance(t, ast.Name)}
        last |= {n.id: "read" for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return out


def _counter_loop(init: ast.stmt | None, s: ast.stmt) -> ast.For | None:
    name = _counter(s)
    if not (name and isinstance(init, ast.Assign) and len(init.targets) == 1 and not s.orelse):
        return None
    if not (isinstance(init.targets[0], ast.Name) and init.targets[0].id == name and len(s.test.ops) == 1):
        return None
    steps = [t for t in s.body if isinstance(t, ast.AugAssign) and isinstance(t.op, ast.Add)
             and isinstance(t.target, ast.Name) and t.target.id == name]  # fmt: skip
    if not isinstance(s.test.ops[0], ast.Lt) or len(steps) != 1:
        return None
    step, stop = steps[0], s.test.comparators[0]
    inside = [n for t in s.body for n in ast.walk(t)]
    stored = [n.id for n in inside if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
    fixed = {n.id for e in (stop, step.value) for n in ast.walk(e) if isinstance(n, ast.Name)}
    if stored.count(name) != 1 or fixed & set(stored) or any(isinstance(n, ast.Continue) for n in inside):
        return None
    later = s.body[s.body.index(step) + 1 :]
    if any(isinstance(n, ast.Name) and n.id == name for t in later for n in ast.walk(t)):
        return None
    bounds = [init.value, stop] + ([] if _one(step.value) else [step.value])
    head = ast.Call(func=ast.Name(id="range", ctx=ast.Load()), args=bounds, keywords=[])
    body = [t for t in s.body if t is not step] or [ast.Pass()]
    return ast.For(target=init.targets[0], iter=head, body=body, orelse=[], lineno=0)


def _one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == 1


def _folded(body: list[ast.stmt]) -> list[ast.stmt]:
    """Each loop unrolled k times with one copy of its body, and its last turn (an `if` after it) dropped."""
    out: list[ast.stmt] = []
    folded: tuple[list[ast.stmt], str] | None = None  # the body of the loop just folded, and its variable
    for s in body:
        if folded and isinstance(s, ast.If) and not s.orelse and _same(*folded, s.body):
            folded = None
            continue
        k = _unrolled(s)
        folded = None
        if k:
            s.body = s.body[: len(s.body) // k]
            s.iter.args = s.iter.args[:2]
            folded = (s.body, s.target.id)
        out.append(s)
    return out


def _unrolled(s: ast.stmt) -> int:
    """k where `s` is `for x in range(a, b, k)` whose body is k copies of one (0 where it is not)."""
    head = s.iter if isinstance(s, ast.For) and isinstance(s.target, ast.Name) and not s.orelse else None
    if not (isinstance(head, ast.Call) and isinstance(head.func, ast.Name) and head.func.id == "range"):
        return 0
    k = head.args[2].value if len(head.args) == 3 and isinstance(head.args[2], ast.Constant) else 0
    if type(k) is not int or not 2 <= k <= UNROLLED or len(s.body) % k:
        return 0
    n = len(s.body) // k
    copies = [s.body[c * n : (c + 1) * n] for c in range(1, k)]
    return k if all(_same(s.body[:n], s.target.id, c) for c in copies) else 0


def _same(one: list[ast.stmt], variable: str, other: list[ast.stmt]) -> bool:
    """Whether `other` is `one` but for the expressions `one` computes of `variable`: there the variable (give or
    take integers) may be any expression, an integer constant any other, and a `min` or `max` (a bound) one of its
    arguments."""
    if len(one) != len(other):
        return False
    reads = _reading(one, variable)
    pairs = [(a, b, False) for a, b in zip(one, other, strict=True)]
    while pairs:
        a, b, inside = pairs.pop()
        if _index(a, variable):
            continue
        if id(a) not in reads and not inside:
            if ast.dump(a) != ast.dump(b):
                return False
            continue
        if inside and all(isinstance(n, ast.Constant) and type(n.value) is int for n in (a, b)):
            continue
        if _bound(a) and not isinstance(b, ast.Call):
            if not any(_same([ast.Expr(x)], variable, [ast.Expr(b)]) for x in a.args):
                return False
            continue
        if type(a) is not type(b):
            return False
        for (_, x), (_, y) in zip(ast.iter_fields(a), ast.iter_fields(b), strict=True):
            if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
                pairs += [(p, q, inside or id(a) in reads) for p, q in zip(x, y, strict=True)]
            elif isinstance(x, ast.AST) and isinstance(y, ast.AST):
                pairs.append((x, y, inside or id(a) in reads))
            elif x != y or isinstance(x, list) or isinstance(y, list):
                return False
    return True


def _index(node: ast.AST, variable: str) -> bool:
    """Whether `node` is the variable, give or take integers (`i`, `1 + i`, `i + 1 + 1`)."""
    parts = list(ast.walk(node))
    if not any(isinstance(n, ast.Name) and n.id == variable for n in parts):
        return False
    return all(isinstance(n, ast.BinOp | ast.Add | ast.Sub | ast.Load) or (isinstance(n, ast.Name) and n.id == variable)
               or (isinstance(n, ast.Constant) and type(n.value) is int) for n in parts)  # fmt: skip


def _reading(body: list[ast.stmt], variable: str) -> set[int]:
    """The ids of the nodes of `body` that hold a read of `variable`."""
    parents = {id(c): p for s in body for p in ast.walk(s) for c in ast.iter_child_nodes(p)}
    found: set[int] = set()
    for n in (n for s in body for n in ast.walk(s)):
        if isinstance(n, ast.Name) and n.id == variable and isinstance(n.ctx, ast.Load):
            while n is not None and id(n) not in found:
                found.add(id(n))
                n = parents.get(id(n))
    return found


def _bound(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
