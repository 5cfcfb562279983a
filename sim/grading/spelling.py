"""One spelling of an expression, for the similarity report's normal form (`normal_form`)."""

import ast
import zlib

METHODS = {m: m for m in "max min sum mean prod argmax argmin cumsum transpose reshape clip std var any all".split()}
METHODS |= {"amax": "max", "amin": "min"}  # numpy's functions that are an array's methods, by the method's name
TRITON_METHODS = {m: m for m in "exp exp2 log log2 sqrt abs sum max min trans cumsum sigmoid reshape to".split()}
COMMUTE = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor)  # operands in one order (red team 102: `&`)
OPERATORS = {"add": (None, ast.Add()), "subtract": (None, ast.Sub()), "multiply": (None, ast.Mult()),
             "divide": (None, ast.Div()), "true_divide": (None, ast.Div()), "power": (None, ast.Pow()),
             "negative": (ast.USub(),)}  # numpy's ufuncs that are an operator (`np.multiply(a, b)`: `a * b`)  # fmt: skip


def _own(node: ast.AST) -> str:
    """A node's type and its own fields but names and constants (a constant's type stays: `0`, `s`, as tokens)."""
    fields = [
        v for f, v in ast.iter_fields(node) if f not in ("id", "arg", "value") and not isinstance(v, ast.AST | list)
    ]
    constant = [type(node.value).__name__] if isinstance(node, ast.Constant) else []
    return "|".join([type(node).__name__, *map(repr, fields), *constant])


class Spelled(ast.NodeTransformer):
    """One spelling of an expression: `getattr(a, "b")` as `a.b` (red team 89: 0.18 against its original); `a + -b`
    as `a - b`, the operands of `+` and `*` in one order, `b > a` as `a < b` (red team 91: 0.75); arguments by
    position (`chip.load(buf="K_j", tensor="K", rows=cols)`), `np.max(S, axis=1)` as `S.max(axis=1)`, `x.transpose()`
    as `x.T` (red team 94: 0.69, 0.77); `np.amax` and `np.add.reduce` as `.max`, `.sum`, `d.get(k)` as `d[k]`,
    `range(0, T, 1)` as `range(T)`, `x[..., None]` as `x[:, None]` (red team 98: 0.65); `f.__call__(x)` as `f(x)`,
    `a.__getattribute__("b")` as `a.b`, numpy's operators (`np.multiply(a, b)`) as `a * b`, `np.newaxis` as None,
    Triton's functions as methods (`tl.max(S, 1)` as `S.max(1)`), `map(f, [a], [b])` as `[f(a, b)]` and `min([x])`
    as `x` (red team 100: 0.26–0.79)."""

    def __init__(self, modules: dict[str, str]):
        self.numpy = {name for name, module in modules.items() if module == "numpy"}
        self.triton = {name for name, module in modules.items() if module == "triton.language"}
        self.keys: dict[int, tuple[ast.AST, int]] = {}  # id → (the node, kept alive so its id stays its own; checksum)

    def key(self, node: ast.AST) -> tuple[str, int, int]:
        """The order of two operands: the node's type, then a checksum of its children's types, then of its whole
        subtree — names and constants left out, as the tokens leave them (a renamed copy orders as its original
        does), each checksum from the children's (linear: comparing `ast.dump`s at every `+` of a long chain took
        10 s for 45 KB, red team 94)."""
        stack = [(node, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in self.keys:
                continue
            children = list(ast.iter_child_nodes(n))
            if not ready:
                stack += [(n, True), *((c, False) for c in children)]
                continue
            whole = [_own(n), *(str(self.keys[id(c)][1]) for c in children)]
            self.keys[id(n)] = (n, zlib.crc32("|".join(whole).encode()))
        children = "|".join(_own(c) for c in ast.iter_child_nodes(node))
        return type(node).__name__, zlib.crc32(children.encode()), self.keys[id(node)][1]

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        folded = _folded(node)
        if folded is not None:  # 'K' + '_j': 'K_j', 1 / 2: 0.5 (red team 102: 0.59)
            return folded
        if isinstance(node.op, ast.Add):
            for x, y in ((node.left, node.right), (node.right, node.left)):
                if isinstance(y, ast.UnaryOp) and isinstance(y.op, ast.USub):
                    return ast.BinOp(left=x, op=ast.Sub(), right=y.operand)
        if isinstance(node.op, COMMUTE) and self.key(node.right) < self.key(node.left):
            node.left, node.right = node.right, node.left
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        value = node.operand.value if isinstance(node.operand, ast.Constant) else None
        if isinstance(node.op, ast.USub) and type(value) in (int, float):  # -1: the constant −1
            return ast.Constant(value=-value)
        return node

    def visit_List(self, node: ast.List) -> ast.expr:
        self.generic_visit(node)  # [a, b] as (a, b) where it is read (red team 102: 0.72)
        return ast.Tuple(elts=node.elts, ctx=node.ctx) if isinstance(node.ctx, ast.Load) else node

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
        named = [k for k in node.keywords if k.arg not in (None, "out", "key")]  # (`out=`, `key=`: effects, a call)
        node.args += [k.value for k in named]
        node.keywords = [k for k in node.keywords if k not in named]
        func = node.func
        if not isinstance(func, ast.Attribute | ast.Name) or node.keywords:
            return node
        builtin = func.id if isinstance(func, ast.Name) else ""
        ones = [a.elts[0] for a in node.args[1:] if isinstance(a, ast.List | ast.Tuple) and len(a.elts) == 1]
        if builtin == "map" and len(node.args) > 1 and len(ones) == len(node.args) - 1:  # map(f, [a], [b]): [f(a, b)]
            return ast.List(elts=[ast.Call(func=node.args[0], args=ones, keywords=[])], ctx=ast.Load())
        one = node.args[0] if len(node.args) == 1 else None
        if builtin in ("min", "max", "sum") and isinstance(one, ast.List | ast.Tuple) and len(one.elts) == 1:
            return one.elts[0]  # min([x]): x (red team 100: min(map(chip.store, ["O"], [O_i], [rows])), 0.33)
        if builtin == "float" and isinstance(one, ast.Constant) and isinstance(one.value, str):
            try:  # float('-inf'): the constant −∞, as -np.inf (red team 102)
                return ast.Constant(value=float(one.value))
            except ValueError:
                return node
        attr = func.attr if isinstance(func, ast.Attribute) else ""
        owner = getattr(func, "value", None)
        module = owner.id if isinstance(owner, ast.Name) else ""
        array = module in self.numpy or module in self.triton
        if len(node.args) == 2 and (builtin in ("min", "max") or (array and attr in ("maximum", "minimum"))):
            if self.key(node.args[1]) < self.key(node.args[0]):  # max(b, a): max(a, b) (red team 102: 0.73)
                node.args.reverse()
            return node
        if (module in self.triton and attr == "expand_dims" and len(node.args) == 2) or (
            attr == "reshape" and len(node.args) == 2 and _ints(node.args) in ([-1, 1], [1, -1])
        ):  # tl.expand_dims(x, 1), x.reshape(-1, 1): x[:, None]; axis 0, (1, -1): x[None, :] (red team 102: 0.49)
            x, last = (
                (node.args[0], _ints(node.args[1:]) == [1])
                if attr == "expand_dims"
                else (owner, _ints(node.args)[0] == -1)
            )
            index = [ast.Slice(), ast.Constant(value=None)] if last else [ast.Constant(value=None), ast.Slice()]
            return ast.Subscript(value=x, slice=ast.Tuple(elts=index, ctx=ast.Load()), ctx=ast.Load())
        if attr == "__call__":  # f.__call__(x): f(x) (red team 100)
            return ast.Call(func=func.value, args=node.args, keywords=[])
        if attr == "__getattribute__" and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
            return ast.Attribute(value=func.value, attr=str(node.args[0].value), ctx=ast.Load())
        reduce = attr == "reduce" and isinstance(func.value, ast.Attribute) and func.value.attr == "add"  # np.add.
        owner = func.value.value if reduce else owner
        module = owner.id if isinstance(owner, ast.Name) else ""
        if module in self.numpy and attr in OPERATORS and len(node.args) == len(OPERATORS[attr]):
            op = OPERATORS[attr]  # np.multiply(a, b): a * b (red team 100: 0.51)
            if len(op) == 1:
                return ast.UnaryOp(op=op[0], operand=node.args[0])
            return self.visit_BinOp(ast.BinOp(left=node.args[0], op=op[1], right=node.args[1]))
        methods = METHODS if module in self.numpy else TRITON_METHODS if module in self.triton else {}
        if (attr in methods or (reduce and module in self.numpy)) and node.args:
            name = "sum" if reduce else methods[attr]  # np.amax(S, 1), np.add.reduce(S, 1), tl.max(S, 1): S.max(1)
            return ast.Call(func=ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load()), args=node.args[1:],
                            keywords=[])  # fmt: skip
        if attr == "transpose" and not node.args:
            return ast.Attribute(value=func.value, attr="T", ctx=ast.Load())
        if attr == "get" and len(node.args) == 1:  # d.get(k): d[k]
            return ast.Subscript(value=func.value, slice=node.args[0], ctx=ast.Load())
        if isinstance(func, ast.Name) and func.id == "range" and 2 <= len(node.args) <= 3:
            one = len(node.args) == 2 or _is(node.args[2], 1)
            start = node.args[0] if one and not _is(node.args[0], 0) else None
            node.args = [*([start] if start else []), node.args[1]] if one else node.args  # range(0, T, 1): range(T)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        self.generic_visit(node)
        owner = node.value.id if isinstance(node.value, ast.Name) else ""
        if owner in self.numpy and node.attr in ("newaxis", "inf"):  # np.newaxis: None; np.inf: the constant ∞
            return ast.Constant(value=None if node.attr == "newaxis" else float("inf"))
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        index = node.slice
        if isinstance(index, ast.Tuple) and index.elts and _is(index.elts[0], ...):  # x[..., None]: x[:, None]
            index.elts[0] = ast.Slice()
        return node


def _ints(nodes: list[ast.expr]) -> list:
    """The int constants among `nodes`, in order (None where one is not)."""
    return [n.value if isinstance(n, ast.Constant) and type(n.value) is int else None for n in nodes]


def _folded(node: ast.BinOp) -> ast.Constant | None:
    """Two constants' +, −, ·, / (numbers below 10¹⁵, or strings joined up to 1,000 characters), else None."""
    a, b = (n.value if isinstance(n, ast.Constant) else None for n in (node.left, node.right))
    if isinstance(a, str) and isinstance(b, str) and isinstance(node.op, ast.Add) and len(a) + len(b) <= 1000:
        return ast.Constant(value=a + b)
    if not all(type(v) in (int, float) and abs(v) < 1e15 for v in (a, b)):
        return None
    operations = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.Div: lambda: a / b}
    if type(node.op) not in operations or (isinstance(node.op, ast.Div) and not b):
        return None
    return ast.Constant(value=operations[type(node.op)]())


def _is(node: ast.expr, value) -> bool:
    """Whether `node` is the constant `value` (of its type: True is not 1)."""
    return isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value
