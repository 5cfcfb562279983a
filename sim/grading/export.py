"""The student's and the instructor's copies of a master, and the markers that tell them apart.

In a master, the instructor's solution sits between `# BEGIN SOLUTION: hint` and `# END SOLUTION`
(or on one line ending in `# SOLUTION: hint`), and the hidden tests between `# BEGIN HIDDEN TESTS`
and `# END HIDDEN TESTS`. The student's copy replaces each solution with
`raise NotImplementedError(hint)` and drops the hidden tests; the instructor's copy is the master.
A line that looks like a marker but is none of these forms, or a student's copy that would still hold a test
that is not public, is refused: a misspelt marker would leak what it was meant to hide. Only the standard library
and `sim.core.errors` are imported here: setup.py makes the wheel's student copies with `student_text`.
"""

import ast
import os
import re
import shutil
from pathlib import Path

from sim.core.errors import InputError

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION(?::\s*(.*))?$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
ONE_LINE = re.compile(r"^(\s*)[^#\s].*\s# SOLUTION(?::\s*(.*))?$")
HIDDEN = (re.compile(r"^\s*# BEGIN HIDDEN TESTS\s*$"), re.compile(r"^\s*# END HIDDEN TESTS\s*$"))
MARKERS = (BEGIN, END, ONE_LINE, *HIDDEN)
LOOKS_LIKE = re.compile(r"#[\W_]*(begin|end)[\W_]*(solution|hidden)|#[\W_]*solution\s*(:|$)", re.IGNORECASE)
FORMS = "# BEGIN SOLUTION[: hint], # END SOLUTION, code  # SOLUTION[: hint], # BEGIN HIDDEN TESTS, # END HIDDEN TESTS"
DEFAULT_HINT = "your code here"


def student_text(master: str, where: str = "master") -> str:
    """The master with every solution replaced by a stub raising NotImplementedError, and no hidden tests."""
    out, origin = _strip(master, where)
    text = "\n".join(out) + "\n"
    _public_only(text, origin, where)
    return text


def check_markers(master: str, where: str = "master") -> None:
    """InputError naming the master's line of the first marker misspelt, never closed or never opened."""
    _strip(master, where)


def _strip(master: str, where: str) -> tuple[list[str], list[int]]:
    """The student copy's lines, and the master's line number each came from."""
    out, origin, region, opened, lines = [], [], None, 0, master.splitlines()
    for number, line in enumerate(lines, 1):
        if LOOKS_LIKE.search(line) and not any(form.match(line) for form in MARKERS):
            raise InputError(f"{where} line {number}: {line.lstrip()!r} looks like a marker but is not one ({FORMS})")
        if region == "hidden":
            region = None if HIDDEN[1].match(line) else region
            continue
        if region == "solution":
            region = None if END.match(line) else region
            continue
        if (m := BEGIN.match(line)) is not None:
            out.append(_stub(m.group(1), m.group(2)))
            region, opened = "solution", number
        elif END.match(line) or HIDDEN[1].match(line):
            raise InputError(f"{where} line {number}: an END marker with no BEGIN before it")
        elif HIDDEN[0].match(line):
            region, opened = "hidden", number
            continue
        elif (m := ONE_LINE.match(line)) is not None:
            out.append(_stub(m.group(1), m.group(2)))
        else:
            out.append(line)
        origin.append(number)
    if region is not None:
        raise InputError(f"{where} line {opened}: this BEGIN {region.upper()} marker is never closed")
    return out, origin


def _public_only(text: str, origin: list[int], where: str) -> None:
    """InputError naming the master's line of a test in the student copy's TESTS whose visibility is not "public"
    (TESTS read as `sim.grading.spec` reads it: the module's top-level literal); a copy that does not parse cannot
    be checked, and is refused too."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as e:  # ValueError: a NUL byte
        at = origin[min(max(getattr(e, "lineno", None) or 1, 1), len(origin)) - 1] if origin else 1
        why = getattr(e, "msg", str(e))
        raise InputError(
            f"{where} line {at}: its student copy would not be Python ({why}); check the markers"
        ) from None
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["TESTS"]):
            continue
        for element in getattr(node.value, "elts", []):
            try:
                test = ast.literal_eval(element)
            except ValueError:
                continue  # not a literal: `spec.load` refuses the assignment
            if isinstance(test, dict) and test.get("visibility") != "public":
                raise InputError(
                    f"{where} line {origin[element.lineno - 1]}: test {test.get('name')!r} is "
                    f"{test.get('visibility')!r} and outside # BEGIN HIDDEN TESTS … # END HIDDEN TESTS"
                )


def solutions(master: str) -> list[str]:
    """The lines of code the solution markers hold (what no student copy may contain)."""
    found, inside = [], False
    for line in master.splitlines():
        if BEGIN.match(line):
            inside = True
        elif END.match(line):
            inside = False
        elif inside:
            found.append(line)
        elif ONE_LINE.match(line):
            found.append(line.split("# SOLUTION")[0])
    return [line.strip() for line in found if line.strip()]


def _stub(indent: str, hint: str | None) -> str:
    return f"{indent}raise NotImplementedError({(hint or DEFAULT_HINT).strip()!r})"


def export(master: Path, *, student: Path | None = None, instructor: Path | None = None) -> Path:
    """Write the student's copy (stubs, public tests) or the instructor's (the master, and a Gradescope
    autograder folder beside it) into a folder; returns the file written."""
    if (student is None) == (instructor is None):
        raise InputError("assignments export: give exactly one of --student DIR or --instructor DIR")
    name, folder = ("student", Path(student)) if student is not None else ("instructor", Path(instructor))
    if not folder.is_dir() and not folder.parent.is_dir():
        raise InputError(f"{name}: no folder {folder.parent} to make {folder.name!r} in")
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{name}: {folder} exists and is not a folder")
    target = folder / master.name
    if target.is_dir():
        raise InputError(f"{name}: {target} is a folder, where the copy would go")
    if target.exists() and os.path.samefile(target, master):  # the student's copy would overwrite the solution
        raise InputError(f"{name}: {target} is the master itself; export into another folder")
    if instructor is not None and (folder / "autograder").is_file():
        raise InputError(f"{name}: {folder / 'autograder'} is a file, where the autograder folder would go")
    folder.mkdir(exist_ok=True)  # the folder asked for, not the ones above it
    if student is not None:
        target.write_text(student_text(master.read_text(encoding="utf-8"), master.name), encoding="utf-8")
        return target
    shutil.copyfile(master, target)
    from sim.grading import gradescope

    gradescope.write_autograder(folder / "autograder", master)
    return target
