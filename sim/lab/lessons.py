"""Self-checks for the lessons' exercises: one line each — ✓, ✗ with what differed, or "not yet" — and hints.

    from sim.lab.lessons import check, hint
    check("one update", lambda: online_update(-np.inf, 0.0, 3.0), expected={"m_new": 3.0, "ℓ_new": 1.0},
          exercise="online_update")
    hint(1)   # stuck: a question; hint(2) the idea; hint(3) the shape of the code

`answer` may be a value or a function of no arguments; a function is called inside the check, so a
stub that raises `NotImplementedError(message)` prints "not yet" with its message, and any other exception
prints the student's own line and message — never a traceback. A dict of expected values names a tuple's
entries; arrays are compared by shape, then by value within `rtol`/`atol`; `unit="B"` compares counts
exactly and says how many bytes apart they are, naming the tensor that moves as many where `expected` is
a `Counted` (see `hbm_bytes`). A check that feeds a function's results back in holds it to its tuple with
`returning`, so a result of another form is named before it is fed. `hint(n)` shows hint n of the exercise
whose check last failed or was not yet done (`hint(n, "merge")` names one).
"""

from dataclasses import dataclass

from sim.lab import hints
from sim.lab.counted import Counted
from sim.lab.feedback import difference, entries, raised

__all__ = ["Counted", "Verdict", "check", "hbm_bytes", "hint", "returning", "verdict"]

PASS, FAIL, NOT_YET = "✓", "✗", "…"
_last = {"exercise": None}  # the exercise whose check last said ✗ or "not yet": what hint(n) talks about


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: `ok` is True (✓), False (✗) or None (not yet), and the line(s) to show."""

    ok: bool | None
    line: str

    def __bool__(self) -> bool:
        return bool(self.ok)


def verdict(
    name: str, answer, expected, *, rtol: float = 1e-6, atol: float = 1e-9, unit: str = "", exercise: str | None = None
) -> Verdict:
    """Compare `answer` (a value, or a function of no arguments) with `expected`; see the module docstring."""
    stuck = " · stuck? hint(1)" if exercise and hints.steps(exercise) else ""
    if callable(answer):
        try:
            answer = answer()
        except Returned as e:
            return _remember(Verdict(False, f"{FAIL} {name}: {e}{stuck}"), exercise)
        except NotImplementedError as e:
            message = str(e) or "replace the `raise NotImplementedError` with your code"
            return _remember(Verdict(None, f"{NOT_YET} {name}: not yet — {message}{stuck}"), exercise)
        except Exception as e:  # the student's code: whatever it raises becomes its line and message
            return _remember(Verdict(False, f"{FAIL} {name}: {raised(e)}"), exercise)
    why = difference(answer, expected, rtol, atol, unit)
    if why:
        return _remember(Verdict(False, f"{FAIL} {name}: {why}{stuck}"), exercise)
    return Verdict(True, f"{PASS} {name}")


class Returned(Exception):
    """A result `returning` refused: its message is the check's ✗ line."""


def returning(function, *names: str):
    """`function`, each of whose results must be the tuple of `names`: else the check says what it was instead."""

    def held(*args):
        got = entries(function(*args), list(names))
        if isinstance(got, str):
            raise Returned(f"{function.__name__}: {got}")
        return tuple(got)

    return held


def check(
    name: str, answer, expected, *, rtol: float = 1e-6, atol: float = 1e-9, unit: str = "", exercise: str | None = None
) -> None:
    """Print the verdict of `verdict(...)` (a notebook cell shows it; nothing else is echoed)."""
    print(verdict(name, answer, expected, rtol=rtol, atol=atol, unit=unit, exercise=exercise).line)


def hint(n: int = 1, exercise: str | None = None) -> None:
    """Print hint `n` of `exercise` (default: the one whose check last said ✗ or not yet)."""
    exercise = exercise or _last["exercise"]
    if exercise is None:
        print("run an exercise's check first, or name it: hint(1, 'merge')")
        return
    print(hints.text(exercise, n))


def hbm_bytes(result, direction: str | None = None) -> Counted:
    """The HBM bytes a run booked (`direction` "read", "write" or both), with each tensor's share named."""
    parts: dict[str, int] = {}
    for tensor, moved in result.ledger.per_tensor("hbm").items():
        for d in ("read", "write") if direction is None else (direction,):
            parts[f"{tensor} {'read' if d == 'read' else 'written'}" if direction is None else tensor] = moved[d]
    return Counted(sum(parts.values()), parts)


def _remember(v: Verdict, exercise: str | None) -> Verdict:
    if exercise:
        _last["exercise"] = exercise
    return v
