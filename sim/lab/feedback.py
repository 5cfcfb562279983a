"""What an exercise's answer got wrong, in one phrase a student can act on.

Values are named (a dict of expected values names a tuple's entries: "m_new", not "value 1 of 2"); arrays
are compared by shape, then value, with what the difference looks like (a constant factor, an overflow, a
NaN); counts are compared exactly, as a difference that names the tensor that moved as many bytes; an
exception is reported at the student's own line.
"""

import sysconfig
import traceback
from pathlib import Path

import numpy as np

from sim.core.format import count

_LIBRARY = [str(Path(__file__).resolve().parents[1])] + [
    sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")
]


class Counted(int):
    """A count (bytes) that also knows its parts, {"K read": bytes, …}, to name what moved a difference."""

    def __new__(cls, total: int, parts: dict[str, int]):
        obj = super().__new__(cls, total)
        obj.parts = {name: int(n) for name, n in parts.items() if n}
        return obj

    def __sub__(self, other):
        """What one run moved beyond another, part by part."""
        theirs = getattr(other, "parts", {})
        names = list(self.parts) + [n for n in theirs if n not in self.parts]
        return Counted(int(self) - int(other), {n: self.parts.get(n, 0) - theirs.get(n, 0) for n in names})


def difference(answer, expected, rtol: float, atol: float, unit: str) -> str:
    """Why `answer` is not `expected` in one phrase, or "" if it is."""
    if isinstance(expected, dict):
        return _named_difference(answer, expected, rtol, atol, unit)
    if hasattr(expected, "__dataclass_fields__") and not isinstance(expected, type):
        return _named_difference(answer, expected, rtol, atol, unit)
    if isinstance(expected, tuple) and not isinstance(answer, tuple | list):
        return f"expected a tuple of {len(expected)}, got {type(answer).__name__}"
    if isinstance(expected, tuple):
        if len(answer) != len(expected):
            return f"expected {len(expected)} values, got {len(answer)}"
        for i, (a, e) in enumerate(zip(answer, expected, strict=True)):
            why = difference(a, e, rtol, atol, unit)
            if why:
                return f"value {i + 1} of {len(expected)}: {why}"
        return ""
    if unit:
        return count_difference(answer, expected, unit)
    return _array_difference(answer, expected, rtol, atol)


_PAPER_NAMES = {"l": "ℓ"}  # Python reads the identifier ℓ as l (NFKC), so a field named ℓ is stored as l


def _named_difference(answer, expected, rtol, atol, unit) -> str:
    """Entry by entry, each under its name: a dict of expected values, or a dataclass's fields."""
    if isinstance(expected, dict):
        names, want = list(expected), list(expected.values())
    else:
        names = list(expected.__dataclass_fields__)
        want = [getattr(expected, n) for n in names]
    if isinstance(answer, dict):
        missing = [n for n in names if n not in answer]
        if missing:
            return f"no {missing[0]!r} in your answer"
        got = [answer[n] for n in names]
    elif isinstance(answer, tuple | list) and isinstance(expected, dict):
        if len(answer) != len(names):
            return f"return {len(names)} values ({', '.join(names)}), not {len(answer)}"
        got = list(answer)
    elif not isinstance(expected, dict) and all(hasattr(answer, n) for n in names):
        got = [getattr(answer, n) for n in names]
    else:
        return f"return {len(names)} values ({', '.join(names)}), not a {type(answer).__name__}"
    for k, (name, a, e) in enumerate(zip(names, got, want, strict=True)):
        why = difference(a, e, rtol, atol, unit)
        if why:
            swapped = [  # an answer in another slot, itself wrong there: the entries came back out of order
                n
                for j, n in enumerate(names)
                if j != k
                and difference(got[j], want[j], rtol, atol, unit)
                and not difference(got[j], e, rtol, atol, unit)
            ]
            order = f" — your {swapped[0]} holds it: return {', '.join(names)} in that order" if swapped else ""
            if order and len(names) <= 4:  # a few results of one function, not a table of rows
                why = why.split(" — ")[0] + order
            return f"{_PAPER_NAMES.get(name, name)}: {why}"
    return ""


def _array_difference(answer, expected, rtol: float, atol: float) -> str:
    try:
        a = np.asarray(answer, dtype=np.float64) if _real(answer) else None
    except (TypeError, ValueError, OverflowError):
        a = None
    if a is None:
        return _not_real(answer)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        if a.shape == e.shape[::-1]:
            hint = " (transposed?)"
        elif a.size == e.size:
            hint = " (a reshape, keepdims or [:, None] missing?)"
        else:
            hint = " (summed over the wrong axis, or broadcast where it should not be?)"
        return f"shape {a.shape}, expected {e.shape}{hint}"
    same = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True) | (a == e)  # a == e: matching infinities
    if same.all():
        return ""
    where = tuple(int(i) for i in np.argwhere(~same)[0])
    at = f" at index {where}" if where else ""
    got, want = (float(x[where]) if where else float(x) for x in (a, e))
    values = f"{(~same).sum()} of {same.size} values differ; first{at}: got {got:.6g}, expected {want:.6g}"
    if a.size == 1:
        values = f"got {got:.6g}, expected {want:.6g}"
    return values + _pattern(a[~same], e[~same], a, e, rtol)


def _real(answer) -> bool:
    """Whether NumPy reads `answer` as real numbers by their value: not None (which it reads as NaN), no string
    ("3.0" it reads as 3.0), no complex number (whose imaginary part it drops)."""
    if answer is None or isinstance(answer, str | bytes):
        return False
    try:
        kind = np.asarray(answer).dtype.kind
    except (TypeError, ValueError, OverflowError):
        return False
    if kind == "O":
        return not any(x is None or isinstance(x, str | bytes | complex) for x in np.asarray(answer).flat)
    return kind in "biuf"


def _not_real(answer) -> str:
    """What an answer that is no real number is, and what to look at."""
    if answer is None:
        return "got None: your function returns nothing — a `return` missing?"
    try:
        values = list(np.asarray(answer, dtype=object).flat)
    except (TypeError, ValueError, OverflowError):  # ragged: not an array at all
        values = []
    if any(x is None for x in values):
        return "got None in place of a number — a `return` missing in a function that made it?"
    text = [x for x in values if isinstance(x, str | bytes)]
    if text:
        return (
            f"got text, {str(text[0])[:40]!r}, where a number is expected — a value printed or formatted, not returned?"
        )
    if any(isinstance(x, complex | np.complexfloating) for x in values):
        return "got complex numbers — a square root or log of a negative number?"
    return f"expected a number or an array, got {type(answer).__name__}"


def _pattern(a: np.ndarray, e: np.ndarray, whole_a: np.ndarray, whole_e: np.ndarray, rtol: float = 0.0) -> str:
    """What the wrong values (a, e) have in common, if something simple: a NaN, an overflow, a factor, an offset
    (for one number held to a loose `rtol`, a model's estimate, a factor or a reciprocal within that tolerance)."""
    if np.isnan(a).any():
        return " — a NaN: inf − inf or 0 · inf somewhere (a row with no finite logit yet, m = −∞?)"
    if np.isinf(a).any() and np.isfinite(e).all():
        return " — an overflow to inf: subtract the largest value before exp"
    if not (np.isfinite(a).all() and np.isfinite(e).all() and (e != 0).all()):
        return ""
    if (a == 0).all():
        return " — every wrong value is 0: an exp that underflowed, or a weight e^(x − ∞)?"
    ratio, shift = a / e, a - e
    whole = (a == np.round(a)).all() and (e == np.round(e)).all() and (np.abs(e) > 2).all()
    if whole and np.allclose(shift, shift.flat[0]) and abs(shift.flat[0]) == 1:
        return " — off by one: < or ≤, rounding up or down?"
    r = float(ratio.flat[0])
    loose = rtol if a.size == 1 and rtol >= 1e-3 else 0.0
    if loose and abs(float(e.flat[0])) != 1 and abs(float(a.flat[0] * e.flat[0]) - 1) <= loose:
        return " — the reciprocal of the expected: a ratio upside down?"
    near = bool(loose) and _nice(_nearest(r)) and abs(r / _nearest(r) - 1) <= loose
    r = _nearest(r) if near else r
    if near or (np.allclose(ratio, r, rtol=1e-6) and (_nice(r) or (a.size > 1 and 1e-3 < abs(r) < 1e3))):
        return f" — {_times(r)} the expected: a factor missing or extra"
    if whole_a.ndim == 2 and _per_row_factor(whole_a, whole_e):
        return " — each row is off by a factor of its own: a row's normalisation (÷ its sum) missing or extra?"
    if a.size > 1 and np.allclose(shift, shift.flat[0], rtol=1e-6, atol=1e-12):
        return f" — every wrong value is off by {float(shift.flat[0]):+.4g}"
    return ""


def _per_row_factor(a: np.ndarray, e: np.ndarray) -> bool:
    """Whether each row of `a` is its row of `e` times one factor of its own (zeros where `e` has zeros)."""
    nonzero = e != 0
    if not (np.isfinite(a).all() and np.isfinite(e).all()) or (a[~nonzero] != 0).any():
        return False
    r = np.where(nonzero, a / np.where(nonzero, e, 1), np.nan)
    seen = nonzero.any(axis=1)
    lo, hi = np.fmin.reduce(r[seen], axis=1), np.fmax.reduce(r[seen], axis=1)
    return bool(np.allclose(lo, hi, rtol=1e-6))


def _nice(r: float) -> bool:
    """A whole number or one over a whole number: the ratios a forgotten factor leaves."""
    return r > 0 and any(abs(x - round(x)) < 1e-6 and 2 <= round(x) <= 4096 for x in (r, 1 / r))


def _nearest(r: float) -> float:
    """The whole number, or one over a whole number, nearest to the ratio `r` (> 0)."""
    return float(max(1, round(r))) if r >= 1 else 1 / max(1, round(1 / r)) if r > 0 else r


def _times(r: float) -> str:
    """A ratio as a student reads it: "2×", "1/1000 of", "1.37×"."""
    if r < 1 and abs(1 / r - round(1 / r)) < 1e-6:
        return f"1/{round(1 / r)} of"
    return f"{round(r)}×" if abs(r - round(r)) < 1e-6 else f"{r:.4g}×"


def count_difference(answer, expected, unit: str) -> str:
    """Counts (bytes, FLOPs) must match exactly; a difference is named by the parts that add up to it."""
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer):
        return f"expected a whole number of {unit}, got {type(answer).__name__} {answer!r}"
    if answer == expected:
        return ""
    gap = int(answer) - int(expected)
    side = "too many" if gap > 0 else "too few"
    said = f"got {count(int(answer))} {unit}, expected {count(int(expected))} {unit}: {count(abs(gap))} {unit} {side}"
    parts = {name: n for name, n in getattr(expected, "parts", {}).items() if n > 0}
    who = _which_parts(abs(gap), parts, unit)
    if not who:
        if abs(gap) == 1:
            return said + " — off by one: rounding up or down, < or ≤?"
        ratio = int(answer) / int(expected) if answer and expected and abs(int(answer)) < 2**900 else 0
        return said + (f" ({_times(ratio)} the right count)" if ratio > 0 else "")
    return f"{said} — {who}: {'counted too often' if gap > 0 else 'left out'}?"


def _which_parts(gap: int, parts: dict[str, int], unit: str) -> str:
    """The tensors whose bytes make up `gap`: one of them, two together, a fraction or multiple of them, or of all."""
    same = [name for name, n in parts.items() if n == gap]
    if same:
        return f"as many as {' or '.join(same)} ({count(gap)} {unit})"
    items = list(parts.items())
    pairs = [(a, na, b, nb) for i, (a, na) in enumerate(items) for b, nb in items[i + 1 :]]
    for a, na, b, nb in pairs:
        if na + nb == gap:
            return f"as many as {a} and {b} together ({count(na)} + {count(nb)} {unit})"
    # K and V, ℓ and m: two tensors of one size, moved together (not one tensor's read and write)
    twins = [(a, na, b, nb) for a, na, b, nb in pairs if na == nb and a.split()[0] != b.split()[0]]
    for a, na, b, nb in twins + [(a, n, "", 0) for a, n in items] + pairs:
        n = na + nb
        if n % gap == 0 and n // gap <= 4096:
            return f"1/{n // gap} of {f'{a} and {b} together' if b else a} ({count(n)} {unit}): one pass or block"
    for name, n in items:
        if gap % n == 0 and gap // n <= 16:
            return f"{gap // n} × as many as {name} ({count(n)} {unit})"
    total = sum(parts.values())
    if parts and total % gap == 0:
        return f"1/{total // gap} of all the bytes: one pass over everything"
    return ""


def raised(e: BaseException) -> str:
    """An exception from the student's code at the student's own line: "ValueError in merge, line 3: …\\n    code"."""
    message = str(e).strip().splitlines()
    text = message[0] if message else "(no message)"
    text = text if len(text) <= 160 else text[:157] + "…"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not _in_library(f.filename)]
    if not frames:
        return f"your code raised {type(e).__name__}: {text}"
    f = frames[-1]
    where = (
        f"in {f.name}, line {f.lineno}" if f.name != "<lambda>" else f"calling your code, line {f.lineno} of the check"
    )
    code = f"\n    {f.line.strip()}" if f.line and f.line.strip() else ""
    return f"your code raised {type(e).__name__} {where}: {text}{code}"


def _in_library(filename: str) -> bool:
    return filename.startswith("<frozen") or any(filename.startswith(p) for p in _LIBRARY)
