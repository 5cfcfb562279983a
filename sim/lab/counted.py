"""Counts (bytes, rows, tiles) in an exercise's answer: compared exactly, a difference named by the tensors
that move as many, and what an answer that is no whole number is (None, a float, a list)."""

import numpy as np

from sim.core.format import count

RETURNED_NOTHING = "got None: your function returns nothing — a `return` missing?"


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


def several(answer) -> str:
    """ "a list of 3 values", "an array of shape (32,)": an answer that holds many where one is expected, else ""."""
    if isinstance(answer, np.ndarray) and answer.ndim:
        return f"an array of shape {answer.shape}"
    if isinstance(answer, list | tuple | set | frozenset | dict):
        return f"a {type(answer).__name__} of {len(answer)} value{'' if len(answer) == 1 else 's'}"
    return ""


def count_difference(answer, expected, unit: str) -> str:
    """Counts (bytes, FLOPs) must match exactly; a difference is named by the parts that add up to it."""
    if answer is None:
        return RETURNED_NOTHING
    if several(answer):
        return f"got {several(answer)} where one whole number of {unit} is expected"
    if isinstance(answer, float | np.floating) and float(answer) == int(expected):
        return f"got {float(answer):,} {unit}, a float: the right count, but a count is a whole number (// not /?)"
    if isinstance(answer, bool) or not isinstance(answer, int | np.integer):
        shown = repr(float(answer)) if isinstance(answer, np.floating) else repr(answer)
        return f"expected a whole number of {unit}, got {type(answer).__name__} {shown[:40]}"
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
        return said + (f" ({times(ratio)} the right count)" if ratio > 0 else "")
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
    # K and V, ℓ and m: two tensors of one size, moved together (not one tensor's read and write); then the one
    # tensor the gap is the largest share of (1/2 of L, not 1/16 of O)
    twins = [(a, na, b, nb) for a, na, b, nb in pairs if na == nb and a.split()[0] != b.split()[0]]
    singles = sorted(((a, n, "", 0) for a, n in items), key=lambda t: (t[1] % gap != 0, t[1] // gap))
    for a, na, b, nb in twins + singles + pairs:
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


def times(r: float) -> str:
    """A ratio as a student reads it: "2×", "1/1000 of", "1.37×"."""
    if r < 1 and abs(1 / r - round(1 / r)) < 1e-6:
        return f"1/{round(1 / r)} of"
    return f"{round(r)}×" if abs(r - round(r)) < 1e-6 else f"{r:.4g}×"
