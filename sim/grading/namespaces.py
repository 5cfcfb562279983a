"""Locals kept in an object or a dict, written back as plain names, for the similarity report's normal form.

Red team 102 hid copies by keeping every local in a namespace: `s = _S()` of a class of the file
(or `SimpleNamespace()`, `type(…)()`) and `s.x` for `x`: 0.05 against the original; or a dict, `LV = {}` and
`LV['x']`: 0.04. A name bound once to such an object, and used only as the receiver of its attributes (or
subscripted only by constant strings), is a namespace; each `s.x` (or `LV['x']`) becomes the name `x`, and the
binding and an empty class go. A method's first parameter (`self`) is its object's namespace likewise.
"""

import ast

from sim.grading.tree_edits import replace

MAKERS = ("SimpleNamespace", "dict", "object")  # calls that make an empty namespace, beside the file's classes


def unpacked(tree: ast.AST) -> set[int]:
    """Each namespace's `s.x` and `LV['x']` rewritten as `x`, and a method's `self.x` too (red team 103: a master
    wrapped in a class, `self.chip.load`, 0.45); the ids of the statements that made the namespaces (to go)."""
    _selves(tree)
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    binds: dict[str, list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            binds.setdefault(n.id, []).append(n)
        elif isinstance(n, ast.arg | ast.FunctionDef | ast.ClassDef):
            binds.setdefault(getattr(n, "arg", None) or n.name, []).append(n)
    makers = {}
    for s in ast.walk(tree):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            kind = _kind(s.value, classes)
            if kind and binds.get(s.targets[0].id) == [s.targets[0]]:
                makers[s.targets[0].id] = (kind, s)
    uses: dict[str, list[tuple[ast.AST, str, ast.AST]]] = {name: [] for name in makers}
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in makers and isinstance(n.ctx, ast.Load):
            uses[n.id].append((n, makers[n.id][0], parents.get(id(n))))
    gone = set()
    for name, found in uses.items():
        keys = [_key(n, kind, parent) for n, kind, parent in found]
        if not found or any(k is None for k in keys):
            continue  # used otherwise too (passed on, called, iterated): not only a namespace
        for (_, _, parent), key in zip(found, keys, strict=True):
            replace(parent, parents[id(parent)], ast.copy_location(ast.Name(id=key, ctx=parent.ctx), parent))
        kind, made = makers[name]
        gone.add(id(made))
        if isinstance(made.value, ast.Call) and getattr(made.value.func, "id", "") in classes:
            gone.add(id(classes[made.value.func.id]))
    return gone


def _selves(tree: ast.AST) -> None:
    """In each method, `self.x` (its first parameter's attribute) as the name `x`."""
    for method in (f for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
                   if isinstance(f, ast.FunctionDef) and f.args.args):  # fmt: skip
        this = method.args.args[0].arg
        parents = {id(c): p for p in ast.walk(method) for c in ast.iter_child_nodes(p)}
        for n in list(ast.walk(method)):
            parent = parents.get(id(n))
            if isinstance(n, ast.Name) and n.id == this and isinstance(parent, ast.Attribute) and parent.value is n:
                replace(
                    parent, parents[id(parent)], ast.copy_location(ast.Name(id=parent.attr, ctx=parent.ctx), parent)
                )


def _kind(value: ast.expr, classes: dict[str, ast.ClassDef]) -> str:
    """ "attribute" for an empty object (of a class of the file that holds nothing but `pass` or a docstring, or a
    maker), "key" for an empty dict, else ""."""
    if isinstance(value, ast.Dict) and not value.keys:
        return "key"
    if not (isinstance(value, ast.Call) and not value.args and not value.keywords):
        return ""
    func = value.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name == "dict":
        return "key"
    empty = name in classes and all(isinstance(s, ast.Pass | ast.Expr) for s in classes[name].body)
    return "attribute" if empty or name in MAKERS else ""


def _key(node: ast.Name, kind: str, parent: ast.AST | None) -> str | None:
    """The local a use names (`s.x`: "x"; `LV['x']`: "x"), or None for any other use."""
    if kind == "attribute" and isinstance(parent, ast.Attribute) and parent.value is node:
        return parent.attr
    if kind == "key" and isinstance(parent, ast.Subscript) and parent.value is node:
        key = parent.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.isidentifier():
            return key.value
    return None
