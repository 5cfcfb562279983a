"""IO efficiency: the HBM bytes the grader booked, against the algorithm's own, tensor by tensor.

The expected traffic of each tensor is what the simulator's listing of the same algorithm moves
at the same shape and blocks (`sim.count`, `sim.count_backward`); its total is checked equal to
the closed form (`sim.machine.iomodel`) before anything is scored. The score is linear, as CS:APP's cache
lab scores misses: with x = (optimum + Σ |booked − expected| over tensors and directions) / optimum,
full marks at x ≤ `io_full`, none at x ≥ `io_zero`.
"""

from dataclasses import dataclass

import sim
from sim.algorithms import iomodel_variants
from sim.core.dtypes import itemsize
from sim.core.format import count
from sim.core.format import ratio as format_ratio

BIG_SRAM = 1 << 30  # the listing counted for the expectation needs no SRAM limit: the blocks are given
LABELS = {"flash1": "Algorithm 1", "flash2": "FlashAttention-2"}
MAX_PHRASES = 2  # the deviations named in the feedback, largest first


@dataclass(frozen=True)
class Expected:
    """What the algorithm asked for moves: bytes per (tensor, "read"/"write"), and their closed-form total."""

    per_tensor: dict[tuple[str, str], int]
    optimum: int
    label: str
    sram_peak: int  # the listing's SRAM peak at these blocks


def expected(grading: dict, case: dict) -> Expected:
    """The expected traffic of `grading`'s algorithm for one drawn case, checked against `sim.machine.iomodel`."""
    algorithm, backward = grading["algorithm"], grading.get("pass") == "backward"
    shape = dict(n=case["N"], nk=case["Nk"], d=case["d"], dtype=case["dtype"], causal=case["causal"],
                 scale=case["scale"], block_rows=case["Br"], block_cols=case["Bc"], sram_bytes=BIG_SRAM)  # fmt: skip
    window = case.get("window")
    counted = (sim.count_backward if backward else sim.count)(
        algorithm, **shape, **({"window": window} if window else {})
    )
    closed = iomodel_variants.sum_counts(
        c for _, c in iomodel_variants.program(algorithm, case["N"], case["Nk"], case["d"], itemsize(case["dtype"]),
                                               case["Br"], case["Bc"], causal=case["causal"], window=window,
                                               backward=backward)
    )  # fmt: skip
    per = {(t, direction): n for t, rw in counted.ledger.per_tensor().items() for direction, n in rw.items() if n}
    if sum(per.values()) != closed.hbm_bytes:
        raise AssertionError(
            f"the {algorithm} listing moved {sum(per.values())} B, its closed form says {closed.hbm_bytes} B"
        )
    label = LABELS[algorithm] + ("'s backward" if backward else "")
    label += " with causal block skipping" if case["causal"] and algorithm == "flash2" else ""
    label += " skipping the blocks outside its window" if window else ""
    return Expected(per, closed.hbm_bytes, label, counted.sram_peak_bytes)


@dataclass(frozen=True)
class Verdict:
    """The IO score of one run: its fraction of the points, the ratio x, and what to tell the student."""

    fraction: float
    ratio: float
    message: str


def score(booked: dict[str, dict[str, int]], sizes: dict[str, int], exp: Expected, inputs, full: float, zero: float,
          hint: str = "") -> Verdict:  # fmt: skip
    """Score the booked traffic ({tensor: {"read", "write"}}) against `exp`; `sizes` are each tensor's bytes."""
    got = {(t, d): n for t, rw in booked.items() for d, n in rw.items() if n}
    keys = sorted(set(got) | set(exp.per_tensor))
    deviation = sum(abs(got.get(k, 0) - exp.per_tensor.get(k, 0)) for k in keys)
    ratio = (exp.optimum + deviation) / exp.optimum
    fraction = 1.0 if ratio <= full else 0.0 if ratio >= zero else (zero - ratio) / (zero - full)
    total = sum(got.values())
    if deviation == 0:
        return Verdict(1.0, 1.0, f"HBM traffic matches {exp.label}, tensor by tensor: {count(total)} B")
    phrases, over_read = _phrases(got, exp, sizes, keys, inputs)
    text = "; ".join(phrases)
    if over_read and hint:
        text += f" — {hint}"
    return Verdict(
        fraction,
        ratio,
        f"{text} ({count(total)} B against {count(exp.optimum)} B: {format_ratio(ratio, 2)} in deviation)",
    )


def _phrases(got, exp: Expected, sizes, keys, inputs) -> tuple[list[str], bool]:
    """One phrase per group of tensors that deviate alike, and whether an input was read more than needed."""
    groups: dict[tuple, list[str]] = {}
    for tensor, direction in keys:
        have, want = got.get((tensor, direction), 0), exp.per_tensor.get((tensor, direction), 0)
        if have != want:
            size = sizes.get(tensor) or 1
            groups.setdefault((direction, round(have / size, 2), round(want / size, 2)), []).append(tensor)
    phrases, over_read = [], False
    ranked = sorted(groups.items(), key=lambda g: -abs(g[0][1] - g[0][2]) * sum(sizes.get(t, 1) for t in g[1]))
    for (direction, have, want), tensors in ranked:
        many = len(tensors) > 1
        names = " and ".join(tensors) if len(tensors) <= 2 else ", ".join(tensors[:-1]) + f" and {tensors[-1]}"
        verb, does = ("read", "reads") if direction == "read" else ("written", "writes")
        be, them, each = ("were", "them", " each") if many else ("was", "it", "")
        done = f"never {verb}" if have == 0 else f"{verb} {_times(have)}{each}"
        asked = f"never {does} {them}" if want == 0 else f"{does} {them} {_times(want)}"
        phrases.append(f"{names} {be} {done} where {exp.label} {asked}")
        over_read |= direction == "read" and have > want and any(t in inputs for t in tensors)
    if len(phrases) > MAX_PHRASES:
        more = len(phrases) - MAX_PHRASES
        phrases = [*phrases[:MAX_PHRASES], f"{more} more {'differs' if more == 1 else 'differ'}"]
    return phrases, over_read


def _times(x: float) -> str:
    """1 → "once", 8 → "8 times", 2.5 → "2.50 times" (multiples of the tensor's size)."""
    if x == 1:
        return "once"
    return f"{x:g} times" if x == int(x) else f"{x:.2f} times"
