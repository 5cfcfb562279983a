"""The Python listing behind a step: where `chip.step` was called, and the lines around it for a renderer to show."""

import linecache
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sim.machine.trace import Step

PACKAGE = Path(__file__).resolve().parent.parent  # sim/
MOST_BYTES = 1 << 20  # a listing's file: the package's largest is 30 kB


@dataclass(frozen=True)
class SourceLine:
    """One line of a listing: its number in the file, its text, and whether the step ran it."""

    number: int
    text: str
    current: bool


@cache
def relative(filename: str) -> str:
    """A listing's file as a step records it: relative to the package (algorithms/flash2.py), or as given
    when it lies outside it (a listing a user registers from elsewhere)."""
    path = Path(filename).resolve()
    return path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else filename


def around(step: Step, before: int = 2, most: int = 14) -> list[SourceLine]:
    """The listing's lines around the `chip.step` call that recorded `step`, that call's line marked current:
    `before` lines above it, then the whole `with` block it opens (at most `most` lines). Empty when the
    step names no code (a version 1 trace) or a file that is not one of the package's own listings: a trace
    loaded from a file names what it likes (/dev/zero, ../../etc/passwd: red team 87), and what is shown here goes
    into the viewer's exports."""
    if step.code is None:
        return []
    file, n = step.code
    path = (PACKAGE / file).resolve()
    if not (path.is_relative_to(PACKAGE) and path.suffix == ".py" and path.is_file()):
        return []
    if path.stat().st_size > MOST_BYTES:
        return []
    lines = [line.rstrip("\n") for line in linecache.getlines(str(path))]
    if not 1 <= n <= len(lines):
        return []
    indent = _indent(lines[n - 1])
    end = n  # the block: every line after the call indented deeper, blank, or closing its parentheses
    while end < len(lines) and end < n + most - 1:
        text = lines[end]
        if text.strip() and _indent(text) <= indent and not text.lstrip().startswith(")"):
            break
        end += 1
    while end > n and not lines[end - 1].strip():
        end -= 1
    start = max(1, n - before)
    return [SourceLine(k, lines[k - 1], k == n) for k in range(start, end + 1)]


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())
