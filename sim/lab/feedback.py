"""What an exercise's answer got wrong, in one phrase a student can act on.

Values are named (a dict of expected values names a tuple's entries: "m_new", not "value 1 of 2"; a dict
returned is refused: the lessons feed such tuples back in); arrays are compared by shape, then value, with what
the difference looks like (a constant factor, an overflow, a NaN, float32's rounding, a unit prefix); counts are
compared exactly (`sim.lab.counted`), as a difference that names the tensor that moved as many bytes; None says
a `return` is missing; an exception is reported at the student's own line.
"""

import re
import sysconfig
import traceback
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import numpy as np

from sim.lab.counted import RETURNED_NOTHING, count_difference, several, times

_LIBRARY = [str(Path(__file__).resolve().parents[1])] + [
    sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")
]


def difference(answer, expected, rtol: float, atol: float, unit: str) -> str:
    """Why `answer` is not `expected` in one phrase, or "" if it is."""
    if isinstance(expected, dict):
        return _named_difference(answer, expected, rtol, atol, unit)
    if hasattr(expected, "__dataclass_fields__") and not isinstance(expected, type):
        return _named_difference(answer, expected, rtol, atol, unit)
    if isinstance(expected, tuple) and answer is None:
        return RETURNED_NOTHING
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
    if isinstance(expected, dict):
        got = entries(answer, names)
        if isinstance(got, str):
            return got
    elif answer is None:
        return RETURNED_NOTHING
    elif isinstance(answer, dict):
        missing = [n for n in names if n not in answer]
        if missing:
            return f"no {missing[0]!r} in your answer"
        got = [answer[n] for n in names]
    elif all(hasattr(answer, n) for n in names):
        got = [getattr(answer, n) for n in names]
    else:
        return f"return {len(names)} values ({', '.join(names)}), not one {type(answer).__name__}"
    if _transposed(got, want):
        return "your answer is the expected transposed: its rows are the expected's columns"
    for k, (name, a, e) in enumerate(zip(names, got, want, strict=True)):
        why = difference(a, e, rtol, atol, unit)
        if why:
            # an answer in another slot, itself wrong there, and this slot's answer another slot's: out of order
            elsewhere = any(not difference(a, want[j], rtol, atol, unit) for j in range(len(names)) if j != k)
            swapped = [
                n
                for j, n in enumerate(names)
                if j != k
                and elsewhere
                and difference(got[j], want[j], rtol, atol, unit)
                and not difference(got[j], e, rtol, atol, unit)
            ]
            order = f" — your {swapped[0]} holds it: return {', '.join(names)} in that order" if swapped else ""
            if order and len(names) <= 4:  # a few results of one function, not a table of rows
                why = re.sub(r" \([^()]*\?\)$", "", why.split(" — ")[0]) + order  # the order, not a shape's hint
            return f"{_PAPER_NAMES.get(name, name)}: {why}"
    return ""


def entries(answer, names: list[str]) -> list | str:
    """The values of `answer`, a tuple (or list, array's rows, generator) of one value per name, or why it is not."""
    if answer is None:
        return RETURNED_NOTHING
    size = len(answer) if hasattr(answer, "__len__") else None  # (a generator's: unknown)
    if isinstance(answer, Iterator) or (isinstance(answer, np.ndarray) and answer.ndim):
        answer = list(islice(answer, len(names) + 1))  # a generator (endless too: red team 92), or rows, in order
    if isinstance(answer, dict):
        return f"got a dict; return the tuple ({', '.join(names)})"
    if not isinstance(answer, tuple | list):
        return f"return {len(names)} values ({', '.join(names)}), not one {type(answer).__name__}"
    if len(answer) != len(names):
        many = size if size is not None else len(answer) if len(answer) <= len(names) else f"more than {len(names)}"
        return f"return {len(names)} values ({', '.join(names)}), not {many}"
    return list(answer)


def _transposed(got: list, want: list) -> bool:
    """Whether the rows of `got` are the columns of `want` (and not already its rows)."""
    try:
        a, e = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    except Exception:
        return False
    return (
        e.ndim == 2 and a.shape == e.T.shape and np.allclose(a, e.T) and not (a.shape == e.shape and np.allclose(a, e))
    )


@np.errstate(over="ignore", invalid="ignore")  # 1e300 against 1e-10: inf, judged here, not warned of (red team 87)
def _array_difference(answer, expected, rtol: float, atol: float) -> str:
    if np.ndim(expected) == 0 and several(answer):
        return f"got {several(answer)} where one number is expected"
    if np.asarray(expected).dtype.kind != "b" and isinstance(answer, bool | np.bool_):
        return f"got {answer}, a bool, where a number is expected — a comparison returned, not the value?"
    try:
        a = np.asarray(answer, dtype=np.float64) if _real(answer) else None
    except Exception:  # a student's __array__ or __float__ may raise anything (red team 92: RuntimeError)
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
    digits = next((n for n in range(6, 17) if f"{got:.{n}g}" != f"{want:.{n}g}"), 17)  # enough to tell them apart
    pair = f"got {got:.{digits}g}, expected {want:.{digits}g}"
    values = pair if a.size == 1 else f"{(~same).sum()} of {same.size} values differ; first{at}: {pair}"
    return values + (_rounding(answer, expected, a, e) or _pattern(a[~same], e[~same], a, e, rtol))


def _rounding(answer, expected, a: np.ndarray, e: np.ndarray) -> str:
    """An answer in float16 or float32, off by no more than that type's rounding, where more digits are expected."""
    kind = getattr(answer, "dtype", None)
    if kind not in (np.float16, np.float32) or np.asarray(expected).dtype.itemsize <= kind.itemsize:
        return ""
    eps = np.finfo(kind).eps  # a few roundings' worth: 16 relative to a value, 4 relative to the largest (a sum's)
    largest = float(np.abs(e[np.isfinite(e)]).max(initial=0.0))  # (an inf among them made atol inf: red team 92)
    if not np.allclose(a, e, rtol=16 * eps, atol=4 * eps * largest):
        return ""
    return f" — {kind}'s rounding: compute in float64 (NumPy's default)"


def _real(answer) -> bool:
    """Whether NumPy reads `answer` as real numbers by their value: not None (which it reads as NaN), no string
    ("3.0" it reads as 3.0), no complex number (whose imaginary part it drops)."""
    if answer is None or isinstance(answer, str | bytes):
        return False
    try:
        kind = np.asarray(answer).dtype.kind
    except Exception:
        return False
    if kind == "O":
        return not any(x is None or isinstance(x, str | bytes | complex) for x in np.asarray(answer).flat)
    return kind in "biuf"


def _not_real(answer) -> str:
    """What an answer that is no real number is, and what to look at."""
    if answer is None:
        return RETURNED_NOTHING
    try:
        values = list(np.asarray(answer, dtype=object).flat)
    except Exception:  # ragged: not an array at all
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
    if np.isposinf(a).any() and np.isfinite(e).all():
        return " — an overflow to inf: subtract the largest value before exp"
    if np.isneginf(a).any() and np.isfinite(e).all():
        return " — −∞: the empty state's m = −∞ kept (the other part's m not taken), or a log of 0?"
    if not (np.isfinite(a).all() and np.isfinite(e).all() and (e != 0).all()):
        return ""
    whole = (a == np.round(a)).all() and (e == np.round(e)).all()
    if (a == 0).all() and not whole:  # counts, not weights: no exp to underflow
        return " — every wrong value is 0: an exp that underflowed, or a weight e^(x − ∞)?"
    ratio, shift = a / e, a - e  # (1e300 / 1e-10: inf, no pattern; red team 87's OverflowError)
    if not (np.isfinite(ratio).all() and np.isfinite(shift).all()):
        return ""
    if whole and (np.abs(e) > 2).all() and np.allclose(shift, shift.flat[0]) and abs(shift.flat[0]) == 1:
        return " — off by one: < or ≤, rounding up or down?"
    r = float(ratio.flat[0])
    loose = rtol if a.size == 1 and rtol >= 1e-3 else 0.0
    if loose and abs(float(e.flat[0])) != 1 and abs(float(a.flat[0] * e.flat[0]) - 1) <= loose:
        return " — the reciprocal of the expected: a ratio upside down?"
    near = bool(loose) and _nice(_nearest(r)) and abs(r / _nearest(r) - 1) <= loose
    r = _nearest(r) if near else r
    alike = np.allclose(ratio, r, rtol=1e-6) and abs(r - 1) > 1e-6
    if near or (alike and (_nice(r) or (a.size > 1 and 1e-3 < abs(r) < 1e3))):
        return f" — {times(r)} the expected: a factor missing or extra"
    if alike and r > 0 and 4 <= abs(np.log10(r)) <= 24 and abs(r / 10 ** round(np.log10(r)) - 1) < 1e-6:
        return f" — 1e{round(np.log10(r)):+d} × the expected: a unit prefix (k, M, G, T; m, µ, n) off?"
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
    return 1e-300 < r < 1e300 and any(abs(x - round(x)) < 1e-6 and 2 <= round(x) <= 4096 for x in (r, 1 / r))


def _nearest(r: float) -> float:
    """The whole number, or one over a whole number, nearest to the ratio `r` (> 0)."""
    if not 1e-300 < r < 1e300:
        return r
    return float(max(1, round(r))) if r >= 1 else 1 / max(1, round(1 / r))


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
    if f.name == "<lambda>" and "NoneType" in text:  # the check could not use what the function returned
        text += " — your function returned None: a `return` missing?"
    return f"your code raised {type(e).__name__} {where}: {text}{code}"


def _in_library(filename: str) -> bool:
    return filename.startswith("<frozen") or any(filename.startswith(p) for p in _LIBRARY)
