"""An assignment's master file, read without running it: its statement, GRADING settings and TESTS.

A master (`lessons/assignments/NN_name.py`) is a Python module whose docstring is the statement,
whose `GRADING` dict says how it is graded and whose `TESTS` list holds the tests, public and
hidden (`# BEGIN HIDDEN TESTS` … `# END HIDDEN TESTS`). Both are literals, read with
`ast.literal_eval`: the grader never imports a master or a student's copy of one.
"""

import ast
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from sim.core.dtypes import DTYPES
from sim.core.errors import InputError
from sim.grading import csvfile, keys
from sim.lab import course

DRIVERS = {
    "chip": ("output", "io", "memory"),
    "softmax": ("update", "merge"),
    "gpu": ("output",),
    "triton": ("output", "io"),
}
VISIBILITY = ("public", "hidden")
MAX_POINTS = 10**6  # a test's points: an inf made "inf / inf" and a results.json no JSON parser reads (red team 86)


@dataclass(frozen=True)
class Assignment:
    """A master (or a student's copy of one): where it is, its statement, settings and tests, the sha256 of its bytes."""

    path: Path
    statement: str
    grading: dict
    tests: tuple[dict, ...]
    sha256: str

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def title(self) -> str:
        return self.grading.get("title", self.name)

    def public(self) -> "Assignment":
        """The same assignment with its public tests only."""
        return replace(self, tests=tuple(t for t in self.tests if t["visibility"] == "public"))

    @property
    def points(self) -> float:
        return sum(t["points"] for t in self.tests)


def locate(name: str) -> Path:
    """A master's path from a path, or from a name in lessons/assignments ("02", "2", "02_flash1_forward"). A name that
    is both (a folder ./02 beside the assignment 02) is refused, unless written as a path: with a / or ending in .py."""
    path = Path(name)
    if path.is_file() or path.is_dir():
        master = None if "/" in name or name.endswith(".py") else _named(name, masters())
        if master is not None:
            other = master.stem if name != master.stem else master
            raise InputError(f"assignment: {name} is both ./{name} and the assignment {master.stem}; write ./{name} "
                             f"or {other}")  # fmt: skip
    if path.is_file():
        return path.resolve()
    if path.is_dir():
        inside = sorted(path.glob("[0-9][0-9]_*.py"))
        if len(inside) == 1:
            return inside[0].resolve()
        raise InputError(f"assignment: {name} is a folder with {len(inside)} assignment files; name one")
    found = masters()
    master = _named(name, found)
    if master is not None:
        return master
    names = ", ".join(m.stem for m in found) or f"none found in {course.assignments()}"
    raise InputError(f"assignment: no file or assignment named {name!r}; known: {names}")


def _named(name: str, found: list[Path]) -> Path | None:
    """The master of `found` that `name` names: its stem, its file's name, its number ("02" or "2")."""
    return next((m for m in found if name in (m.stem, m.name, m.name[:2], m.name[:2].lstrip("0"))), None)


def masters() -> list[Path]:
    """Every master in lessons/assignments, in order."""
    return sorted(course.assignments().glob("[0-9][0-9]_*.py"))


def load(path: Path) -> Assignment:
    """Read and check an assignment file (a master, or a student's copy with its public tests)."""
    path = Path(path)
    try:
        data = path.read_bytes()
        tree = ast.parse(data.decode("utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"assignment: cannot read {path} ({e})") from None
    except SyntaxError as e:  # (a NUL byte: no line under Python 3.11.7; a ValueError under 3.11.2)
        raise InputError(f"assignment: {path.name}{f' line {e.lineno}' if e.lineno else ''}: {e.msg}") from None
    except ValueError as e:
        raise InputError(f"assignment: {path.name}: {e}") from None
    values, literals = {}, set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("GRADING", "TESTS") and node.targets[0].id not in values:
                try:
                    values[node.targets[0].id] = ast.literal_eval(node.value)
                except (ValueError, TypeError, MemoryError, RecursionError):  # TypeError: {[1]: 2}, unhashable
                    raise InputError(f"assignment: {path.name}: {node.targets[0].id} must be a literal") from None
                literals.add(id(node.targets[0]))
    for node in ast.walk(tree):  # `TESTS += […]`, TESTS.append(…), `import json as TESTS`: unseen by grader and export
        named = [n for n in _bound_or_named(node) if n in ("GRADING", "TESTS")]
        if named and id(node) not in literals:
            raise InputError(f"assignment: {path.name} line {getattr(node, 'lineno', '?')}: {named[0]} is named "
                             f"outside its one `{named[0]} = …` literal, which is all the grader and export read")  # fmt: skip
    for key in ("GRADING", "TESTS"):
        if key not in values:
            raise InputError(f"assignment: {path.name} has no {key} (is it an assignment file?)")
    grading, tests = values["GRADING"], values["TESTS"]
    if not isinstance(tests, list):  # TESTS = None was a traceback (red team 88)
        raise InputError(f"assignment: {path.name}: TESTS must be a list of tests; got {type(tests).__name__}")
    check_grading(grading, path.name)
    names = set()
    for test in tests:
        check_test(test, grading["driver"], path.name)
        if test["name"] in names:
            raise InputError(f"assignment: {path.name}: two tests are named {test['name']!r}")
        names.add(test["name"])
    return Assignment(path, ast.get_docstring(tree) or "", grading, tuple(tests), hashlib.sha256(data).hexdigest())


def _bound_or_named(node: ast.AST) -> list[str]:
    """The names `node` uses or binds: a Name, an import's alias, a def's or class's name, `except … as`, global,
    nonlocal, a match pattern's capture, an argument."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[0]]
    if isinstance(node, ast.Global | ast.Nonlocal):
        return list(node.names)
    if isinstance(node, ast.arg):
        return [node.arg]
    name = getattr(node, "name", None) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef |
                                                     ast.ExceptHandler | ast.MatchAs | ast.MatchStar) else None  # fmt: skip
    return [name] if isinstance(name, str) else []


def check_grading(grading, where: str) -> None:
    """GRADING: a driver flashsim knows, and what that driver needs."""
    if not isinstance(grading, dict) or grading.get("driver") not in DRIVERS:
        raise InputError(f"assignment: {where}: GRADING['driver'] must be one of {', '.join(DRIVERS)}")
    if grading["driver"] in ("chip", "triton"):
        for key in ("entry", "algorithm") + (("outputs",) if grading["driver"] == "chip" else ()):
            if key not in grading:
                raise InputError(f"assignment: {where}: GRADING needs {key!r} for the {grading['driver']} driver")
        if grading["algorithm"] not in ("flash1", "flash2"):
            raise InputError(f"assignment: {where}: GRADING['algorithm'] must be flash1 or flash2")
        if grading.get("pass", "forward") not in ("forward", "backward"):
            raise InputError(f"assignment: {where}: GRADING['pass'] must be forward or backward")
        if grading["driver"] == "chip":
            _check_outputs(grading, where)
    if "entry" in grading and not (isinstance(grading["entry"], str) and grading["entry"].isidentifier()):
        raise InputError(f"assignment: {where}: GRADING['entry'] must be a function's name; got {grading['entry']!r}")
    keys.grading(grading, f"assignment: {where}: GRADING")


def _check_outputs(grading: dict, where: str) -> None:
    """GRADING['outputs']: the pass's answers by name (`problem.make`'s), each in the inputs' dtype or a named one."""
    names = ("dQ", "dK", "dV") if grading.get("pass") == "backward" else ("O", "L") if grading[
        "algorithm"] == "flash2" else ("O", "ℓ", "m")  # fmt: skip
    outputs = grading["outputs"]
    if not isinstance(outputs, dict) or sorted(outputs, key=str) != sorted(names):
        raise InputError(f"assignment: {where}: GRADING['outputs'] must name {', '.join(names)}; got {outputs!r:.80}")
    kinds = ("input", *DTYPES)
    if not all(isinstance(kind, str) and kind in kinds for kind in outputs.values()):
        raise InputError(
            f"assignment: {where}: GRADING['outputs'] takes {', '.join(kinds)} for each; got {outputs!r:.80}"
        )


def check_test(test, driver: str, where: str) -> None:
    """One test: a name, a visibility, points, a check the driver knows, and shapes it can draw."""
    if not isinstance(test, dict) or not isinstance(test.get("name"), str):
        raise InputError(f"assignment: {where}: every test is a dict with a 'name'")
    if not (test["name"].isprintable() and test["name"].strip()):  # "one\nblock" printed as "one block" (red team 88)
        raise InputError(f"assignment: {where}: test name {test['name'][:60]!r} is not one line of printable text")
    if test["name"] in csvfile.FIRST + csvfile.LAST or test["name"].startswith((*csvfile.FORMULA, "'")):
        raise InputError(f"assignment: {where}: test name {test['name'][:60]!r} would be read as the CSV's own column "
                         "or as a formula (red team 89: 'score', '=1+1' and \"'=1+1\" shifted its columns)")  # fmt: skip
    label = f"assignment: {where}: test {test['name']!r}"
    if test.get("visibility") not in VISIBILITY:
        raise InputError(f"{label}: visibility must be public or hidden")
    points = test.get("points")
    if isinstance(points, bool) or not isinstance(points, int | float) or not 0 < points <= MAX_POINTS:
        raise InputError(f"{label}: points must be a number above 0 and at most {MAX_POINTS:,}; got {points!r:.40}")
    if test.get("check") not in DRIVERS[driver]:
        raise InputError(f"{label}: check must be one of {', '.join(DRIVERS[driver])}")
    keys.check(test, driver, label)
