"""Edits of a syntax tree the normal form's rewrites share: a node replaced where its parent holds it, and each
read of a name replaced by what a function gives for it."""

import ast


def replace(old: ast.AST, parent: ast.AST, new: ast.AST) -> None:
    """`new` where `parent` holds `old` (a field, or an item of a list field)."""
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
        elif isinstance(value, list):
            value[:] = [new if v is old else v for v in value]


def reads_replaced(tree: ast.AST, put) -> None:
    """Each name read in `tree` replaced by `put(name)` (the name itself where nothing replaces it)."""
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                value[:] = [_put(child, put) for child in value]
            else:
                setattr(node, field, _put(value, put))


def _put(child, put):
    return put(child) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load) else child
