"""The map in ARCHITECTURE.md, held to the code: every import of `sim` and `gpu` (function-level ones too) points
down the layers written there, no import circle anywhere, every folder says in one line what lives in it, and no
module grows past ~300 lines."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 300

# (package prefix, layer, group), most specific first — the table of ARCHITECTURE.md. A module may import
# one of a lower layer, or one of its own group; never upwards, never sideways into another group.
LAYERS = [
    ("sim.core", 0, "core"),
    ("sim.machine", 1, "machine"),
    ("sim.algorithms", 2, "algorithms"),
    ("gpu.lab", 5, "tools"),
    ("gpu", 2, "gpu"),
    ("sim.api", 3, "api"),
    ("sim.cli", 5, "tools"),
    ("sim.viewer", 5, "tools"),
    ("sim.viz", 5, "tools"),
    ("sim.grading", 5, "tools"),
    ("sim.lab", 5, "tools"),
    ("sim", 4, "facade"),  # sim/__init__.py: the public names, over sim.api
]


def place(module: str) -> tuple[int, str]:
    """(layer, group) of a module of sim or gpu."""
    for prefix, layer, group in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer, group
    raise AssertionError(f"{module} is in no layer of ARCHITECTURE.md")


def modules() -> dict[str, Path]:
    """Every module of the two packages, by dotted name (a package by its own name)."""
    found = {}
    for top in ("sim", "gpu"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of sim and gpu that `path` imports anywhere in it (inside functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from sim.machine import memory` imports the module sim.machine.memory; `from sim.core.errors import
            # InputError` the module sim.core.errors
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names
            ]
        else:
            continue
        out.update(n for n in names if n.split(".")[0] in ("sim", "gpu"))
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, known) - {name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_place_reads_the_table():
    assert place("sim.machine.memory") == (1, "machine")
    assert place("gpu.lab.bench") == (5, "tools")
    assert place("gpu.flash") == (2, "gpu")
    assert place("sim") == (4, "facade")


def test_cycles_finds_a_circle_and_only_circles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    assert cycles(graph()) == []


def test_imports_point_down_the_layers():
    wrong = []
    for source, targets in graph().items():
        layer, group = place(source)
        for target in sorted(targets):
            t_layer, t_group = place(target)
            if not (t_layer < layer or t_group == group):
                wrong.append(f"{source} (layer {layer}, {group}) imports {target} (layer {t_layer}, {t_group})")
    assert wrong == []


@pytest.mark.parametrize(
    "folder",
    sorted({p.parent for p in (ROOT / "sim").rglob("*.py")} | {p.parent for p in (ROOT / "gpu").rglob("*.py")}),
    ids=str,
)
def test_every_folder_says_what_lives_there(folder):
    init = folder / "__init__.py"
    assert init.exists(), f"{folder} has no __init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc, f"{init} has no docstring"


def test_no_module_over_300_lines():
    long = {
        str(p.relative_to(ROOT)): n for p in modules().values() if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
