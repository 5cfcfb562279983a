"""Self-checks for the lessons' exercises: one line each — ✓, ✗ with what differed, or "not yet".

    from sim.lab.lessons import check
    check("m after one update", lambda: update(m, ℓ, x)[0], expected=3.0)

`answer` may be a value or a function of no arguments; a function is called inside the check, so a
stub that raises `NotImplementedError(hint)` prints "not yet" with its hint, and any other exception
prints one line naming it — never a traceback. Arrays are compared by shape, then by value within
`rtol`/`atol`; `unit="B"` compares byte counts exactly and says by what factor they differ.
"""

from dataclasses import dataclass, fields, is_dataclass

import numpy as np

from sim.core.format import count

PASS, FAIL, NOT_YET = "✓", "✗", "…"
_PAPER_NAMES = {"l": "ℓ"}  # Python reads the identifier ℓ as l (NFKC), so a field named ℓ is stored as l


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: `ok` is True (✓), False (✗) or None (not yet), and the line to show."""

    ok: bool | None
    line: str

    def __bool__(self) -> bool:
        return bool(self.ok)


def verdict(name: str, answer, expected, *, rtol: float = 1e-6, atol: float = 1e-9, unit: str = "") -> Verdict:
    """Compare `answer` (a value, or a function of no arguments) with `expected`; see the module docstring."""
    if callable(answer):
        try:
            answer = answer()
        except NotImplementedError as e:
            hint = str(e) or "replace the `raise NotImplementedError` with your code"
            return Verdict(None, f"{NOT_YET} {name}: not yet — {hint}")
        except Exception as e:  # the student's code: whatever it raises becomes one line
            return Verdict(False, f"{FAIL} {name}: your code raised {type(e).__name__}: {_first_line(e)}")
    why = _difference(answer, expected, rtol, atol, unit)
    if why:
        return Verdict(False, f"{FAIL} {name}: {why}")
    return Verdict(True, f"{PASS} {name}")


def check(name: str, answer, expected, *, rtol: float = 1e-6, atol: float = 1e-9, unit: str = "") -> None:
    """Print the one-line verdict of `verdict(...)` (a notebook cell shows it; nothing else is echoed)."""
    print(verdict(name, answer, expected, rtol=rtol, atol=atol, unit=unit).line)


def _difference(answer, expected, rtol: float, atol: float, unit: str) -> str:
    """Why `answer` is not `expected` in one phrase, or "" if it is."""
    if is_dataclass(expected) and not isinstance(expected, type):
        for f in fields(expected):
            if not hasattr(answer, f.name):
                return f"expected an object with a field {f.name!r}, got {type(answer).__name__}"
            why = _difference(getattr(answer, f.name), getattr(expected, f.name), rtol, atol, unit)
            if why:
                return f"{_PAPER_NAMES.get(f.name, f.name)}: {why}"
        return ""
    if isinstance(expected, tuple) and not isinstance(answer, tuple | list):
        return f"expected a tuple of {len(expected)}, got {type(answer).__name__}"
    if isinstance(expected, tuple):
        if len(answer) != len(expected):
            return f"expected {len(expected)} values, got {len(answer)}"
        for i, (a, e) in enumerate(zip(answer, expected, strict=True)):
            why = _difference(a, e, rtol, atol, unit)
            if why:
                return f"value {i + 1} of {len(expected)}: {why}"
        return ""
    if unit:
        return _count_difference(answer, expected, unit)
    try:
        a = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        return f"expected a number or an array, got {type(answer).__name__}"
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        return f"shape {a.shape}, expected {e.shape}"
    same = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True) | (a == e)  # a == e: matching infinities
    if same.all():
        return ""
    where = tuple(int(i) for i in np.argwhere(~same)[0])
    at = f" at index {where}" if where else ""
    got, want = (float(x[where]) if where else float(x) for x in (a, e))
    return f"{(~same).sum()} of {same.size} values differ; first{at}: got {got:.6g}, expected {want:.6g}"


def _count_difference(answer, expected, unit: str) -> str:
    """Counts (bytes, FLOPs) must match exactly."""
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer):
        return f"expected a whole number of {unit}, got {type(answer).__name__} {answer!r}"
    if answer == expected:
        return ""
    factor = f" ({answer / expected:.2f}× the right count)" if expected else ""
    return f"got {count(int(answer))} {unit}, expected {count(int(expected))} {unit}{factor}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else "(no message)"
