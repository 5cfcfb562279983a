"""The student's and the instructor's copies of a master, and the markers that tell them apart.

In a master, the instructor's solution sits between `# BEGIN SOLUTION: hint` and `# END SOLUTION`
(or on one line ending in `# SOLUTION: hint`), and the hidden tests between `# BEGIN HIDDEN TESTS`
and `# END HIDDEN TESTS`. The student's copy replaces each solution with
`raise NotImplementedError(hint)` and drops the hidden tests; the instructor's copy is the master.
"""

import os
import re
import shutil
from pathlib import Path

from sim.core.errors import InputError

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION(?::\s*(.*))?$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
ONE_LINE = re.compile(r"^(\s*)[^#\s].*\s# SOLUTION(?::\s*(.*))?$")
HIDDEN = (re.compile(r"^\s*# BEGIN HIDDEN TESTS\s*$"), re.compile(r"^\s*# END HIDDEN TESTS\s*$"))
DEFAULT_HINT = "your code here"


def student_text(master: str, where: str = "master") -> str:
    """The master with every solution replaced by a stub raising NotImplementedError, and no hidden tests."""
    out, region, lines = [], None, master.splitlines()
    for number, line in enumerate(lines, 1):
        if region == "hidden":
            region = None if HIDDEN[1].match(line) else region
            continue
        if region == "solution":
            region = None if END.match(line) else region
            continue
        if (m := BEGIN.match(line)) is not None:
            out.append(_stub(m.group(1), m.group(2)))
            region = "solution"
        elif END.match(line) or HIDDEN[1].match(line):
            raise InputError(f"{where} line {number}: an END marker with no BEGIN before it")
        elif HIDDEN[0].match(line):
            region = "hidden"
        elif (m := ONE_LINE.match(line)) is not None:
            out.append(_stub(m.group(1), m.group(2)))
        else:
            out.append(line)
    if region is not None:
        raise InputError(f"{where}: a BEGIN {region.upper()} marker is never closed")
    return "\n".join(out) + "\n"


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
