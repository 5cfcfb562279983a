"""What computes without effects, for the similarity report's normal form (`normal_form`): a statement that only
computes is padding and goes, and so does an assignment of it that nothing reads; a temporary of it may be put back
wherever it is read."""

import ast

EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
IDLE = frozenset(
    """abs all any ascii bin bool callable chr dict divmod float format frozenset hash hex id int isinstance
    issubclass iter len list max min oct ord pow print range repr round set sorted str sum tuple type memoryview bytes
    bytearray enumerate zip reversed slice complex object map filter""".split()
)
ASSERTIONS = frozenset(("static_assert", "static_print", "device_assert", "device_print"))
PURE_MODULES = ("numpy", "math", "cmath", "triton.language")  # whose functions compute and change nothing, but:
CHANGES = frozenset(
    """store atomic_add atomic_and atomic_cas atomic_max atomic_min atomic_or atomic_xchg atomic_xor
    copyto put putmask place fill_diagonal at seed shuffle""".split()
)
PURE_FUNCTION = "<a function that computes nothing else>"  # `modules`' value for the file's idle functions


def pure(node: ast.AST, modules: dict[str, str]) -> bool:
    """Computes without effects: no await, yield or walrus, no call but of IDLE builtins, assertions, PURE_MODULES'
    functions that change nothing, the file's own functions that compute nothing else (`nop()`), and a constant's
    methods (`"".strip()`: red team 100); a builtin that calls what it is given (`map(chip.store, …)`, `key=`) only
    of such callables (red team 100: `min(map(chip.store, …))` went as idle). `modules`: `_imported`'s, with
    PURE_FUNCTION for the file's idle functions."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and not (_idle(n.func) or _module_call(n, modules) or _own_idle(n.func, modules)):
            return False
        if isinstance(n, ast.Call) and not all(_idle_callable(f, modules) for f in _called(n)):
            return False
        if isinstance(n, EFFECTS) and not isinstance(n, ast.Call):
            return False
    return True


def _own_idle(func: ast.expr, modules: dict[str, str]) -> bool:
    """A function of the file that computes nothing else, or a method of a constant."""
    if isinstance(func, ast.Name):
        return modules.get(func.id) == PURE_FUNCTION
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Constant)


def _called(call: ast.Call) -> list[ast.expr]:
    """What a builtin calls of its arguments: map's and filter's function, iter's callable, a `key=`."""
    name = call.func.id if isinstance(call.func, ast.Name) else ""
    given = call.args[:1] if name in ("map", "filter") or (name == "iter" and len(call.args) == 2) else []
    return given + [k.value for k in call.keywords if k.arg == "key"]


def _idle_callable(f: ast.expr, modules: dict[str, str]) -> bool:
    """A callable whose calls change nothing: an idle builtin, a pure module's function, an idle function of the
    file, a lambda that computes without effects."""
    if isinstance(f, ast.Lambda):
        return pure(f.body, modules)
    return _idle(f) or _own_idle(f, modules) or _module_call(ast.Call(func=f, args=[], keywords=[]), modules)


def pure_functions(tree: ast.AST, modules: dict[str, str]) -> set[str]:
    """The file's functions (defs, and lambdas bound to a name) whose every statement computes without effects (a
    `nop()` after every line: red team 100), found to a fixed point (one may call another); a name bound twice is
    none."""
    bodies: dict[str, list] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            bodies.setdefault(n.name, []).append(n.body)
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            bodies.setdefault(n.targets[0].id, []).append(
                [ast.Return(n.value.body)] if isinstance(n.value, ast.Lambda) else None
            )
    found: set[str] = set()
    while True:
        known = modules | dict.fromkeys(found, PURE_FUNCTION)
        new = {name for name, (body, *more) in bodies.items() if not more and body is not None and name not in found
               and all(_idle_statement(t, known) for t in body)}  # fmt: skip
        if not new:
            return found
        found |= new


def _idle_statement(s: ast.stmt, modules: dict[str, str]) -> bool:
    if isinstance(s, ast.Return):
        return s.value is None or pure(s.value, modules)
    return isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and pure(s.value, modules))


def _module_call(call: ast.Call, modules: dict[str, str]) -> bool:
    """A call of a function of PURE_MODULES (through the module's name: `np.exp`, `tl.dot`) that changes nothing."""
    chain, func = [], call.func
    while isinstance(func, ast.Attribute):
        chain.append(func.attr)
        func = func.value
    module = modules.get(func.id, "") if isinstance(func, ast.Name) and chain else ""
    pure = any(module == m or module.startswith(m + ".") for m in PURE_MODULES)
    return pure and not CHANGES.intersection(chain) and all(k.arg != "out" for k in call.keywords)


def _idle(func: ast.expr) -> bool:
    """A builtin whose result is all it does (its statement drops it), or an assertion or print of Triton's."""
    if isinstance(func, ast.Name):
        return func.id in IDLE
    return isinstance(func, ast.Attribute) and func.attr in ASSERTIONS
