"""The lessons' hints in steps: a question, then the idea, then the shape of the code — never the code.

Each lesson's hints are a TOML file `lessons/hints/NN_name.toml` with one table per exercise,
`[online_update] steps = ["…", "…", "…"]`; the reference solutions stay in `lessons/solutions/`.
"""

import tomllib
from functools import cache
from pathlib import Path

from sim.lab import course

KINDS = ("a question", "the idea", "the shape of the code")


def folders() -> list[Path]:
    """Where hint files are looked for: beside a running notebook, below the current directory, in the course
    (the checkout's lessons/ or the installed flashsim_lessons)."""
    here = Path.cwd()
    return [p for p in (here / "hints", here / "lessons" / "hints", course.root() / "hints") if p.is_dir()]


@cache
def _table(folder: Path) -> dict[str, tuple[str, list[str]]]:
    """{exercise: (lesson, steps)} of every hint file in `folder`."""
    table = {}
    for path in sorted(folder.glob("[0-9][0-9]_*.toml")):
        for exercise, entry in tomllib.loads(path.read_text()).items():
            table[exercise] = (path.stem, list(entry["steps"]))
    return table


def steps(exercise: str) -> tuple[str, list[str]] | None:
    """(lesson, hints) of `exercise`, or None where no hint file names it."""
    for folder in folders():
        found = _table(folder).get(exercise)
        if found:
            return found
    return None


def text(exercise: str, n: int) -> str:
    """Hint `n` (from 1) of `exercise`, one paragraph, saying which step it is and what comes next."""
    found = steps(exercise)
    if found is None:
        return f"no hints for {exercise!r}; the lesson's exercises have them by the names in their cells' tags"
    lesson, hints = found
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return f"hints are numbered from 1: hint(1) for {exercise}"
    if n > len(hints):
        where = "" if course.masters_here() else " of a checkout of flashsim (an install ships none)"
        return f"{exercise} has {len(hints)} hints; its reference solution is in lessons/solutions/{lesson}.py{where}"
    kind = KINDS[n - 1] if n <= len(KINDS) else "one more step"
    more = f" (then hint({n + 1}))" if n < len(hints) else " (the last hint)"
    return f"{exercise} · hint {n} of {len(hints)}, {kind}{more}: {hints[n - 1]}"
