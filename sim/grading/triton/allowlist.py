"""What a kernel file may contain, checked on its syntax tree before any of it runs.

A kernel file holds imports of `triton`, `triton.language` and `math`, constants (literals, the
assignment's GRADING and TESTS among them, or arithmetic of numbers: `arithmetic`), and
`@triton.jit` functions written in Triton's language: names of `tl`, the tensors' own methods, a
few builtins, literals. Nothing else — no other module, no dunder, no `.handle` (the interpreter's
raw arrays and pointers), no `constexpr_function`, no store into a subscript or attribute, no
float()/int()/bool() but of a literal, no `del` (Triton's compiler has no `del`) — because Triton's
interpreter runs a kernel as ordinary Python, and the compile check (`compile_check`) sees only the
branches its case takes.
"""

import ast
from collections import Counter

from sim.core.errors import InputError
from sim.grading.triton import arithmetic
from sim.grading.triton.arithmetic import Number, Unfit
from sim.grading.triton.vocabulary import BUILTINS, refusal
from sim.grading.triton.vocabulary import chain as _chain

MODULES = ("triton", "triton.language", "math")
CONVERSIONS = ("float", "int", "bool")  # of literals only: the interpreter would make Python numbers of tensors
FORBIDDEN = (
    ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef,
    ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.With, ast.AsyncWith, ast.Try, ast.Delete, ast.JoinedStr,
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr, ast.Starred, ast.Match,
)  # fmt: skip


def check(source: str, where: str = "kernel file") -> set[str]:
    """Raise InputError naming the first line that a kernel file may not contain; the kernels that are still the
    handout's stubs (they raise before anything else)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:  # a NUL byte: ValueError under Python 3.11.2, SyntaxError with no line later
        nul = source.find("\0")
        line = getattr(e, "lineno", None) or (source[:nul].count("\n") + 1 if nul >= 0 else 1)
        raise InputError(f"{where} line {line}: {getattr(e, 'msg', None) or e}") from None
    except (MemoryError, RecursionError):  # 3,000 signs or terms in a row: the parser's stack, no line said
        raise InputError(f"{where} line ?: nested too deeply for Python's parser") from None
    aliases, constants, kernels = _module(tree, where)
    _once(tree, where)
    mutable = {n.id for node in tree.body if isinstance(node, ast.Assign) and _mutable(node.value)
               for n in node.targets}  # fmt: skip
    for fn in kernels:
        _kernel(fn, aliases, (constants - mutable) | {k.name for k in kernels}, where, mutable)
    return {fn.name for fn in kernels if isinstance(_first(fn), ast.Raise)}


def _once(tree: ast.Module, where: str) -> None:
    """Each name bound once at the module's top: a second `def` of a kernel rebinds it, and the compile check,
    which skips the handout's stubs by name, once skipped the real kernel after a stub of its name (red team 88)."""
    seen: set[str] = set()
    for node in tree.body:
        bound = [node.name] if isinstance(node, ast.FunctionDef) else []
        bound += [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        bound += [a.asname or a.name.split(".")[0] for a in getattr(node, "names", []) if isinstance(a, ast.alias)]
        for name in bound:
            if name in seen:
                _refuse(node, where, f"{name} is defined twice; a kernel file binds each name once")
            seen.add(name)


def _first(fn: ast.FunctionDef) -> ast.stmt:
    """A function's first statement after its docstring (a stub's `raise NotImplementedError`)."""
    body = fn.body[1:] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body
    return body[0] if body else fn.body[0]


def _refuse(node: ast.AST, where: str, what: str):
    raise InputError(f"{where} line {getattr(node, 'lineno', '?')}: {what}")


def _module(tree: ast.Module, where: str) -> tuple[dict[str, str], set[str], list[ast.FunctionDef]]:
    """The module's imports (alias → module), constants and kernels; anything else is refused."""
    aliases, constants, kernels, numbers = {}, set(), [], {}
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and i == 0:
            continue  # the docstring
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in MODULES:
                    _refuse(node, where, f"imports {a.name}; a kernel file may import only {', '.join(MODULES)}")
                if a.asname is None and "." in a.name:
                    _refuse(node, where, f"write `import {a.name} as tl`")
                aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom):
            if node.module != "triton" or any(a.name != "language" for a in node.names):
                _refuse(node, where, f"imports from {node.module}; a kernel file may import only {', '.join(MODULES)}")
            aliases |= {(a.asname or a.name): "triton.language" for a in node.names}
        elif isinstance(node, ast.AnnAssign):
            _refuse(node, where, "write a constant as NAME = tl.constexpr(literal), without an annotation")
        elif isinstance(node, ast.Assign):
            targets = node.targets
            if not all(isinstance(t, ast.Name) and not _dunder(t.id) for t in targets):
                _refuse(node, where, "only a NAME = literal assignment may stand outside a kernel")
            try:
                number = _constant(node.value, aliases, numbers, set(aliases) | constants | {k.name for k in kernels})
            except Unfit as e:
                _refuse(node, where, f"a constant outside a kernel must be a literal or arithmetic of numbers (or "
                        f"tl.constexpr of one): {e}")  # fmt: skip
            constants |= {t.id for t in targets}
            numbers |= dict.fromkeys((t.id for t in targets), number) if number is not None else {}
        elif isinstance(node, ast.FunctionDef):
            if not _is_jit(node, aliases):
                _refuse(node, where, f"{node.name} must be a @triton.jit function (and nothing else may decorate it)")
            kernels.append(node)
        else:
            _refuse(node, where, f"a kernel file may not hold a {type(node).__name__} statement here")
    return aliases, constants, kernels


def _constant(node, aliases: dict[str, str], numbers: dict, bound: set[str]) -> Number | None:
    """A module constant's value where it is a number, else None: a literal (numbers, strings, lists, tuples, dicts
    of them, signed), or arithmetic of numbers (`arithmetic`; `numbers`, `bound`: the constants and names above it),
    or tl.constexpr of either; Unfit where it is neither."""
    wrapped = False
    while isinstance(node, ast.Call) and _chain(node.func) in _constexpr(aliases):
        if len(node.args) != 1 or node.keywords:
            raise Unfit("tl.constexpr() takes one value")
        node, wrapped = node.args[0], True
    try:
        literal = ast.literal_eval(node)
    except (ValueError, TypeError):  # TypeError: {[1]: 2}, a key unhashable
        number = arithmetic.value(node, numbers, aliases, bound)
        return Number(number.value, number.constexpr or wrapped)
    return Number(literal, wrapped) if type(literal) in (int, float) else None


def _constexpr(aliases: dict[str, str]) -> set[str]:
    """`tl.constexpr` as this file may spell it (`triton.language.constexpr` too)."""
    return {f"{a}.constexpr" for a, m in aliases.items() if m == "triton.language"} | {
        f"{a}.language.constexpr" for a, m in aliases.items() if m == "triton"
    }


def _is_jit(fn: ast.FunctionDef, aliases: dict[str, str]) -> bool:
    jit = {f"{a}.jit" for a, m in aliases.items() if m == "triton"}
    return len(fn.decorator_list) == 1 and _chain(fn.decorator_list[0]) in jit


def _dunder(name: str) -> bool:
    return "__" in name


def _mutable(value: ast.expr) -> bool:
    """A list, dict or set literal (or tl.constexpr of one): a constant a kernel could change (`B = STASH; B += [x]`)."""
    inner = value.args[0] if isinstance(value, ast.Call) and value.args else value
    return isinstance(inner, ast.List | ast.Dict | ast.Set)


def _kernel(fn: ast.FunctionDef, aliases: dict[str, str], names: set[str], where: str, mutable: set[str]) -> None:
    """Every node of a kernel's body: Triton's language and nothing that reaches Python's machinery."""
    if fn.args.vararg or fn.args.kwarg:
        _refuse(fn, where, f"{fn.name} may not take *args or **kwargs")
    _signature(fn, aliases, where)
    constexpr = _constexpr(aliases)
    conditions = _conditions(fn)
    params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    notes = {id(a.annotation) for a in params} | {id(fn.returns)}  # (where `tl.tensor` may stand)
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local = stored | {a.arg for a in params}
    fixed = (
        names
        | {"min", "max"}
        | {a.arg for a in params if a.annotation is not None and _chain(a.annotation) in constexpr}
    )
    fixed -= stored  # (a constant, constexpr argument or builtin min/max the kernel rebinds is not one)
    pinned = _pinned(fn, fixed, constexpr)
    fixed |= pinned
    for node in ast.walk(fn):
        if node is fn:
            continue
        if isinstance(node, ast.Delete):
            _refuse(node, where, "Triton's compiler does not compile `del` (unsupported AST node type: Delete); "
                    "drop it: a GPU frees a tile after its last use, and so does the SRAM count (`liveness`)")  # fmt: skip
        if isinstance(node, FORBIDDEN):
            _refuse(node, where, f"a kernel may not use {type(node).__name__} (Triton's language only)")
        if isinstance(node, ast.Raise):
            if not _stub(node):
                _refuse(node, where, "a kernel may raise only NotImplementedError('…') (the handout's stub)")
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            _refuse(node, where, "a kernel may not compare with `is`: the compiler and the interpreter disagree on "
                    "identity (a branch one takes and the other does not); compare values")  # fmt: skip
        elif isinstance(node, ast.Name) and node.id in mutable and node.id not in local:
            _refuse(node, where, f"{node.id} is a list, dict or set: a kernel may use only constants that cannot "
                    "change (programs share nothing but HBM)")  # fmt: skip
        elif isinstance(node, ast.Name):
            if _dunder(node.id) or node.id not in local | names | set(aliases) | BUILTINS:
                _refuse(
                    node, where, f"{node.id} is not a name a kernel may use (tl, its arguments, constants, builtins)"
                )
        elif isinstance(node, ast.Attribute) and (why := refusal(node, aliases, annotation=id(node) in notes)):
            _refuse(node, where, why)
        if isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            _refuse(node, where, "a kernel may assign only to names (Triton's tensors are values; a store into a "
                    "container or attribute would keep state outside HBM)")  # fmt: skip
        if isinstance(node, ast.BoolOp) and id(node) not in conditions and not _static(node, fixed):
            _refuse(node, where, "and/or may stand only as a condition (if, while, a ternary's test): as a value the "
                    "compiler keeps a constant operand where Python keeps the tensor (red team 89: (N > 0) or 2)")  # fmt: skip
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) not in pinned:
            _refuse(node, where, "a kernel may not annotate an assignment but NAME: tl.constexpr = a value known when "
                    "compiled (literals, constants, tl.constexpr arguments, arithmetic and min/max of them), NAME "
                    "bound nowhere else: of a runtime value it makes a constant of what the interpreter computes")  # fmt: skip
        if isinstance(node, ast.Call) and _chain(node.func) in constexpr:
            if not all(isinstance(a, ast.Constant) for a in node.args) or node.keywords:
                _refuse(node, where, "tl.constexpr() of a value: the compiler takes it for a constant, the "
                        "interpreter computes it (a branch one takes and the other does not); only of a literal")  # fmt: skip
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CONVERSIONS:
            if not all(isinstance(a, ast.Constant) for a in node.args) or node.keywords:
                _refuse(node, where, f"{node.func.id}() of a value would make a Python number of it, outside "
                        "Triton's tensors (and the SRAM count); only of a literal, as float(\"-inf\")")  # fmt: skip
        elif isinstance(node, ast.keyword) and node.arg is not None and _dunder(node.arg):
            _refuse(node, where, f"{node.arg} is not a keyword a kernel may use")
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            _refuse(node, where, "a kernel may not hold bytes literals")


def _signature(fn: ast.FunctionDef, aliases: dict[str, str], where: str) -> None:
    """Annotations and defaults that run nothing: Python evaluates them when the file is loaded, outside the kernel
    (a return annotation `print(...)` once wrote the compile check's verdict, red team 86). An annotation is a name,
    a dotted name (tl.constexpr, tl.int32) or a constant; a default a literal (-1 too)."""
    annotations = [a.annotation for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs] + [fn.returns]
    for note in (n for n in annotations if n is not None):
        if not (_chain(note) or isinstance(note, ast.Constant)):
            _refuse(note, where, f"{fn.name}'s annotations may only be names (tl.constexpr, tl.int32), not "
                    "expressions: Python runs them when the file is loaded")  # fmt: skip
    for d in fn.args.defaults + [d for d in fn.args.kw_defaults if d is not None]:
        try:
            ok = isinstance(ast.literal_eval(d), int | float | bool | str | type(None))
        except ValueError:
            ok = False
        if not ok:
            _refuse(d, where, f"{fn.name}'s defaults may only be numbers, strings, True, False or None")


def _pinned(fn: ast.FunctionDef, fixed: set[str], constexpr: set[str]) -> set[str]:
    """The locals `NAME: tl.constexpr = value` binds, bound nowhere else, of a value `_static` (in terms of each other
    too): a constexpr to the compiler and the same number to Python (Triton's tutorial: `MASK_BLOCK_M1: tl.constexpr =
    BLOCK_M1 // BLK_SLICE_FACTOR`; a step `STEP: tl.constexpr = -BLOCK_N` that a GPU counts down)."""
    stores = Counter(n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    stores.update(a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs)
    values = {n.target.id: n.value for n in ast.walk(fn) if isinstance(n, ast.AnnAssign) and n.value is not None
              and isinstance(n.target, ast.Name) and stores[n.target.id] == 1 and _chain(n.annotation) in constexpr}  # fmt: skip
    pinned: set[str] = set()
    while new := {name for name, value in values.items() if name not in pinned and _static(value, fixed | pinned)}:
        pinned |= new
    return pinned


def _static(node: ast.expr, fixed: set[str]) -> bool:
    """Known when compiled: literals, constants and tl.constexpr arguments (`fixed`), operators on them (an and/or
    of these is a constant to the compiler and to Python alike: `CAUSAL and BLOCK_N > 0`, red team 93), and the
    builtin min/max of them (a constexpr to the compiler: `builtin_min`)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in fixed
    if isinstance(node, ast.Call):
        minmax = isinstance(node.func, ast.Name) and node.func.id in {"min", "max"} & fixed and not node.keywords
        return minmax and bool(node.args) and all(_static(a, fixed) for a in node.args)
    parts = {ast.UnaryOp: ("operand",), ast.BinOp: ("left", "right"), ast.Compare: ("left", "comparators"),
             ast.BoolOp: ("values",)}.get(type(node))  # fmt: skip
    if parts is None:
        return False
    found = [getattr(node, f) for f in parts]
    return all(_static(x, fixed) for part in found for x in (part if isinstance(part, list) else [part]))


def _conditions(fn: ast.FunctionDef) -> set[int]:
    """The ids of the and/or expressions whose truth alone is used: an if's, while's or ternary's test, `not`'s
    operand, or an operand of one of those (the compiler and Python agree on truth, not on the value)."""
    found: set[int] = set()
    for node in ast.walk(fn):  # (breadth first: a test is met before its operands)
        tests = [node.test] if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert) else []
        asserts = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
        tests += node.args[:1] if asserts and node.func.attr in ("static_assert", "device_assert") else []
        tests += [node.operand] if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) else []
        tests += node.values if isinstance(node, ast.BoolOp) and id(node) in found else []
        found |= {id(t) for t in tests if isinstance(t, ast.BoolOp)}
    return found


def _stub(node: ast.Raise) -> bool:
    e = node.exc
    return (
        isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "NotImplementedError"
        and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in e.args) and not e.keywords
    )  # fmt: skip
