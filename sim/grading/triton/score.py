"""One Triton test's points and feedback: correctness as for every assignment, then the SRAM budget and the bytes.

The submission's process sends the outputs, then the record's rows: (argument, read 0 / write 1,
kernel line, bytes) and a last one (−1, program, line, the program's largest tiles in bytes).
"""

import dataclasses
from collections import defaultdict

import numpy as np

from sim.core.format import human_bytes
from sim.grading import checks, traffic
from sim.grading.checks import Outcome
from sim.grading.problem import Problem
from sim.grading.report import TestResult
from sim.grading.triton import launch

DIRECTIONS = ("read", "write")
U_FP16 = 2.0**-11  # fp16's unit roundoff


@dataclasses.dataclass
class Ledger:
    """The record, read back: bytes per argument and direction, the lines behind each, the largest tiles."""

    booked: dict[str, dict[str, int]]
    lines: dict[tuple[str, str], dict[int, int]]
    tiles: int
    program: int
    line: int


def ledger(rows: np.ndarray, names: list[str]) -> Ledger:
    """The rows the submission's process sent, checked, as a Ledger (ValueError for rows that do not add up)."""
    if rows.ndim != 2 or rows.shape[1] != 4 or len(rows) == 0 or rows[-1, 0] != -1:
        raise ValueError("the record of loads and stores is malformed")
    booked = {n: dict.fromkeys(DIRECTIONS, 0) for n in names}
    lines: dict = defaultdict(lambda: defaultdict(int))
    for t, direction, line, n in rows[:-1].astype(np.int64):
        if not (0 <= t < len(names) and direction in (0, 1) and n >= 0):
            raise ValueError("the record of loads and stores is malformed")
        booked[names[t]][DIRECTIONS[direction]] += int(n)
        lines[(names[t], DIRECTIONS[direction])][int(line)] += int(n)
    _, program, line, tiles = (int(x) for x in rows[-1])
    return Ledger(booked, lines, tiles, program, line)


def evaluate(grading: dict, problem: Problem, outcome: Outcome, settings: dict) -> TestResult:
    """Points and feedback: the outputs against float64, every program's tiles within the SRAM, the bytes."""
    test = problem.test
    if outcome.status != "done":
        return checks.evaluate(grading, _as_output(problem), outcome)
    try:
        record = ledger(outcome.results[-1], launch.buffer_names(settings))
    except (ValueError, IndexError):
        return TestResult(test["name"], test["visibility"], 0.0, float(test["points"]), "failed",
                          "the submission's process sent a malformed record", problem.describe())  # fmt: skip
    result = checks.evaluate(grading, _as_output(problem), Outcome("done", results=outcome.results[:-1]))
    for name, array in zip(settings["results"], outcome.results[:-1], strict=False):
        unwritten = int(np.isnan(array).reshape(len(array), -1).any(axis=1).sum()) if array.size else 0
        if unwritten:
            result.points, result.status = 0.0, "failed"
            result.feedback = f"{name} has {unwritten} rows never written by tl.store (still NaN)"
            return result
    if result.status == "failed" and _rounded_p(problem, outcome.results[0]):
        result.feedback += " — within what rounding P̃_ij to fp16 costs (u·max|V|): keep P̃_ij in float32 for P̃_ij V_j"
    if record.tiles > problem.sram_bytes:
        result.points, result.status = 0.0, "failed"
        result.feedback = (
            f"program {record.program} held {human_bytes(record.tiles)} of tiles at line {record.line}, over the "
            f"SRAM budget of {human_bytes(problem.sram_bytes)} — load one Br × D block of Q and one Bc × D block "
            f"of K and V at a time"
        )
        return result
    if test["check"] != "io" or result.status != "passed":
        return result
    sizes = {name: _nbytes(name, problem, settings) for name in record.booked}
    verdict = traffic.score(record.booked, sizes, problem.expected, set(problem.inputs), test.get("io_full", 1.0),
                            test.get("io_zero", 1.5), grading.get("io_hint", ""))  # fmt: skip
    result.points = round(result.max_points * verdict.fraction, 2)
    result.status = "passed" if verdict.fraction == 1 else "partial" if verdict.fraction > 0 else "failed"
    result.feedback = (
        verdict.message if verdict.fraction == 1 else f"correct, but {verdict.message}{_lines(record, problem)}"
    )
    result.hbm_bytes = sum(n for rw in record.booked.values() for n in rw.values())
    return result


def _rounded_p(problem: Problem, O: np.ndarray) -> bool:
    """Whether a forward's O, off FlashAttention-2's bound, is within it plus u·max|V| (P̃ rounded to fp16 in P̃V)."""
    if problem.case["dtype"] != "fp16" or "O" not in problem.reference or O.shape != problem.reference["O"].shape:
        return False
    want, v = problem.reference["O"], problem.inputs["V"].astype(np.float64)
    return bool(np.all(np.abs(O - want) <= problem.bounds["O"] + U_FP16 * np.abs(v).max(initial=0.0)))


def _as_output(problem: Problem) -> Problem:
    """The same problem checked for its outputs only (the bytes are this module's)."""
    return dataclasses.replace(problem, test={**problem.test, "check": "output"})


def _nbytes(name: str, problem: Problem, settings: dict) -> int:
    if name in problem.inputs:
        return problem.inputs[name].nbytes
    shape, dtype = next((s, t) for n, s, t in settings["made"] if n == name)
    return int(np.prod(shape)) * (4 if dtype == "fp32" else 2)


def _lines(record: Ledger, problem: Problem) -> str:
    """Where the tensor whose bytes deviate most was moved: its lines of the kernel, busiest first."""
    expected = problem.expected.per_tensor
    worst = max(record.lines, key=lambda k: abs(sum(record.lines[k].values()) - expected.get(k, 0)), default=None)
    if worst is None or sum(record.lines[worst].values()) == expected.get(worst, 0):
        return ""
    busiest = sorted(record.lines[worst].items(), key=lambda x: -x[1])[:2]
    verb = "read" if worst[1] == "read" else "written"
    return (
        f"; {worst[0]} is {verb} at line{'s' if len(busiest) > 1 else ''} {', '.join(str(line) for line, _ in busiest)}"
    )
