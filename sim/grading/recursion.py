"""A function that recurses on an index at its tail turned back into its loop, for the similarity report's normal form.

Red team 103 hid a copy of a master by writing each of its loops as a function calling itself on the next block
(`def inner(i, K_j, V_j): if i >= Tr: return; …; inner(i + 1, K_j, V_j)`, started by `inner(0, K_j, V_j)`: 0.52
against the original). A function whose body is `if i >= n: return` (or `if i < n:` around the rest), then its work,
then a call of itself with `i + s` (s a positive integer) for one parameter and every other parameter passed on as it
came, where its work neither assigns that parameter nor what n reads, nor returns, becomes
`for i in range(start, n, s): …` of a new first value `start`: once called, `inlining` puts it back as that loop.
"""

import ast
import itertools


def unwound(tree: ast.AST) -> None:
    """Each function of `tree` that recurses on an index at its tail as the loop it is."""
    nodes = list(ast.walk(tree))
    taken = {getattr(n, "id", None) or getattr(n, "arg", None) or getattr(n, "name", None) for n in nodes}
    for fn in reversed([n for n in nodes if isinstance(n, ast.FunctionDef)]):  # inner ones first
        found = _tail_recursion(fn)
        if found is None:
            continue
        k, stop, step, work = found
        index = fn.args.args[k].arg
        start = next(f"{index}_{n}" for n in itertools.count() if f"{index}_{n}" not in taken)
        taken.add(start)
        fn.args.args[k] = ast.arg(arg=start)
        bounds = [ast.Name(id=start, ctx=ast.Load()), stop] + ([] if step == 1 else [ast.Constant(value=step)])
        head = ast.Call(func=ast.Name(id="range", ctx=ast.Load()), args=bounds, keywords=[])
        fn.body = [ast.For(target=ast.Name(id=index, ctx=ast.Store()), iter=head, body=work, orelse=[], lineno=0)]


def _tail_recursion(fn: ast.FunctionDef):
    """(the index's position, n, s, the work) where `fn` recurses on an index at its tail, else None."""
    a = fn.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs or fn.decorator_list:
        return None
    first, *rest = fn.body
    if isinstance(first, ast.If) and not first.orelse and not rest:  # if i < n: work; f(i + 1, …)
        guard, body = _below(first.test), first.body
    elif isinstance(first, ast.If) and not first.orelse and _returns_nothing(first.body):  # if i >= n: return
        guard, body = _at_least(first.test), rest
    else:
        return None
    if guard is None or not body:
        return None
    index, stop = guard
    *work, tail = body
    call = tail.value if isinstance(tail, ast.Expr) else None
    params = [p.arg for p in a.args]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == fn.name):
        return None
    if index not in params or call.keywords or len(call.args) != len(params):
        return None
    k = params.index(index)
    step = _increment(call.args[k], index)
    others = [(x, p) for j, (x, p) in enumerate(zip(call.args, params, strict=True)) if j != k]
    passed = all(isinstance(x, ast.Name) and x.id == p for x, p in others)
    if not step or not passed or not work:
        return None
    inside = [n for s in work for n in ast.walk(s)]
    stored = {n.id for n in inside if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(stop) if isinstance(n, ast.Name)} | {index}
    exits = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal, ast.Continue, ast.Break)
    calls_itself = any(isinstance(n, ast.Name) and n.id == fn.name for n in inside)
    if stored & bound or calls_itself or any(isinstance(n, exits) for n in inside):
        return None
    return k, stop, step, work


def _returns_nothing(body: list[ast.stmt]) -> bool:
    only = body[0] if len(body) == 1 else None
    return isinstance(only, ast.Return) and (only.value is None or _is_none(only.value))


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _below(test: ast.expr) -> tuple[str, ast.expr] | None:
    """(i, n) of `i < n`."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name):
        if isinstance(test.ops[0], ast.Lt):
            return test.left.id, test.comparators[0]
    return None


def _at_least(test: ast.expr) -> tuple[str, ast.expr] | None:
    """(i, n) of `i >= n` (as `spelling` writes it, `n <= i`) or `not i < n`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _below(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.LtE):
        if isinstance(test.comparators[0], ast.Name):
            return test.comparators[0].id, test.left
    return None


def _increment(node: ast.expr, index: str) -> int:
    """s where `node` is `index + s` (either way round), s a positive integer; else 0."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return 0
    for x, y in ((node.left, node.right), (node.right, node.left)):
        if isinstance(x, ast.Name) and x.id == index and isinstance(y, ast.Constant) and type(y.value) is int:
            return y.value if y.value > 0 else 0
    return 0
