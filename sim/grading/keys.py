"""The type and range of every key of a test that the drivers read (`problem.draw`, `checks`, the grader's clock),
and of GRADING's own keys (`grading`).

An assignment file is an instructor's, or a student's edited copy: a key of the wrong type ("N": "abc"), out of
range ("N": -5), a range upside down ([16, 4]) or a key a driver needs left out ("Br") is refused here, in one
line naming the test, the key and what it must be, before any case is drawn.
"""

import keyword
import math
import sys

from sim.core.dtypes import DTYPES
from sim.core.errors import InputError
from sim.grading import allowlist

MAX_SIDE = 8192  # N, Nk, rows, length, Br, Bc: the masters' largest is 1024 (a memory test)
MAX_D = 1024
ATTENTION = {"N": MAX_SIDE, "Nk": MAX_SIDE, "d": MAX_D, "Br": MAX_SIDE, "Bc": MAX_SIDE}
SOFTMAX = {"rows": MAX_SIDE, "length": MAX_SIDE}
MAX_SECONDS = 3600.0


def check(test: dict, driver: str, label: str) -> None:
    """InputError (starting with `label`) unless every key `driver` reads of `test` has a type and range it takes."""
    sides = SOFTMAX if driver == "softmax" else ATTENTION
    for key, high in sides.items():
        if key == "Nk" and test.get(key) == "N":
            continue
        if key not in test:
            raise InputError(f"{label}: needs {key!r} (a whole number from 1 to {high}, or a range [lo, hi])")
        _side(test[key], key, high, label)
    dtype = test.get("dtype", "fp32")
    if not all(isinstance(c, str) and c in DTYPES for c in (dtype if isinstance(dtype, list) else [dtype])) or (
        dtype == []
    ):
        raise InputError(f"{label}: dtype must be fp16, bf16 or fp32 (or a list of them); got {_shown(dtype)}")
    for key in ("causal", "empty_row"):
        if not isinstance(test.get(key, False), bool):
            raise InputError(f"{label}: {key} must be true or false; got {_shown(test[key])}")
    _number(test, "logit_scale", 0.0, 1e6, label)
    _number(test, "masked", 0.0, 1.0, label)
    _number(test, "sram_slack", 0.01, 1e3, label)
    _number(test, "timeout_s", 0.01, MAX_SECONDS, label)
    if "sram" in test and (not _whole(test["sram"]) or not 1 <= test["sram"] <= 2**40):
        raise InputError(f"{label}: sram must be a whole number of bytes from 1 to 2**40; got {_shown(test['sram'])}")
    if "window" in test and test["window"] is not None:
        _window(test["window"], label)
    for key in ("io_full", "io_zero"):
        _number(test, key, 1.0, 1e6, label)
    if not test.get("io_full", 1.0) < test.get("io_zero", 1.5):
        raise InputError(f"{label}: io thresholds need 1 ≤ io_full < io_zero")


GRADING_KEYS = frozenset({"title", "driver", "entry", "algorithm", "outputs", "pass", "timeout_s", "io_hint", "forbid",
                          "causal_argument", "window_argument"})  # fmt: skip


def grading(grading: dict, label: str) -> None:
    """InputError (starting with `label`, "…: GRADING") unless GRADING's texts, flags, timeout and modules to forbid
    are of the types the grader takes, and that it holds no key the grader does not read (a misspelt one)."""
    unknown = sorted(set(grading) - GRADING_KEYS, key=str)
    if unknown:
        raise InputError(f"{label} has {_shown(unknown[0])}, which the grader does not read; it reads "
                         f"{', '.join(sorted(GRADING_KEYS))}")  # fmt: skip
    for key in ("title", "io_hint"):
        if not isinstance(grading.get(key, ""), str):
            raise InputError(f"{label}['{key}'] must be text; got {_shown(grading[key])}")
    for key in ("causal_argument", "window_argument"):
        if not isinstance(grading.get(key, False), bool):
            raise InputError(f"{label}['{key}'] must be true or false; got {_shown(grading[key])}")
    _number(grading, "timeout_s", 0.01, MAX_SECONDS, label)
    _forbid(grading.get("forbid", []), grading["driver"], label)


def _forbid(forbid, driver: str, label: str) -> None:
    """GRADING['forbid']: distinct dotted module names, none that every graded process of `driver` reads."""
    names = forbid if isinstance(forbid, list) else [None]
    if not all(isinstance(name, str) and _dotted(name) for name in names) or len(set(names)) != len(names):
        raise InputError(f"{label}['forbid'] must be a list of distinct module names (a.b.c); got {_shown(forbid)}")
    read = allowlist.HARNESS_MODULES + {"gpu": allowlist.GPU_MODULES, "triton": allowlist.TRITON_MODULES}.get(
        driver, ()
    )
    for name in names:
        if name.split(".")[0] in sys.stdlib_module_names or any(m == name or m.startswith(name + ".") for m in read):
            raise InputError(f"{label}['forbid'] names {name!r}, which every graded process reads (the standard "
                             "library or the grader's harness): it cannot be forbidden")  # fmt: skip


def _dotted(name: str) -> bool:
    """Whether `name` is a module's dotted name: identifiers, none a keyword, joined by dots."""
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in name.split("."))


def _side(value, key: str, high: int, label: str, low: int = 1) -> None:
    """A whole number from `low` to `high`, or a range [lo, hi] of them with lo ≤ hi."""
    ok = _whole(value) and low <= value <= high
    if isinstance(value, list):
        ok = len(value) == 2 and all(_whole(v) and low <= v <= high for v in value) and value[0] <= value[1]
    if not ok:
        raise InputError(f"{label}: {key} must be a whole number from {low} to {high}, or a range [lo, hi] of them "
                         f"with lo ≤ hi; got {_shown(value)}")  # fmt: skip


def _window(window, label: str) -> None:
    """(left, right): each side −1 (unbounded), a whole number of 0 or more, or a range [lo, hi] of them."""
    if not isinstance(window, list | tuple) or len(window) != 2:
        raise InputError(f"{label}: window must be [left, right]; got {_shown(window)}")
    for side, value in zip(("left", "right"), window, strict=True):
        _side(list(value) if isinstance(value, tuple) else value, f"window's {side} side", MAX_SIDE, label, -1)


def _number(test: dict, key: str, low: float, high: float, label: str) -> None:
    value = test.get(key)
    if value is None and key not in test:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(f"{label}: {key} must be a number from {low:g} to {high:g}; got {_shown(value)}")
    if not low <= value <= high:
        raise InputError(f"{label}: {key} must be a number from {low:g} to {high:g}; got {_shown(value)}")


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value) -> str:
    """The value in one short line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"
