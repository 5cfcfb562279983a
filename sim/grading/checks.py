"""Turn what a test's run left behind into points and one line of feedback.

For the chip driver the outputs are read from the grader's own HBM and the bytes from its own
ledger; for the others (functions on arrays, a GPU kernel) the results come back through the pipe
and are checked the same way against the float64 reference.
"""

from dataclasses import dataclass, field

import numpy as np

from sim.core.dtypes import DTYPES
from sim.core.format import abs_error, human_bytes
from sim.grading import traffic
from sim.grading.problem import Problem
from sim.grading.report import TestResult
from sim.grading.server import ChipServer

# How far a memory test's file-backed resident memory (RssFile: the libraries' pages) may fall below the mark. The
# masters' only rise (by 0.76–0.88 MiB: library code first run); 1 MiB covers the kernel's per-CPU counters' drift,
# and with the half matrix allowed (at least RESIDENT_FLOOR) stays below one whole N × Nk float32 matrix.
GIVEN_BACK = 1 << 20


@dataclass
class Outcome:
    """How a test's run ended: "done" (with results and a memory peak), "raised" or "died" (with a message)."""

    status: str
    message: str = ""
    results: list[np.ndarray] = field(default_factory=list)
    peak: int | None = None  # tracemalloc's, sent by the child
    server: ChipServer | None = None
    grown: int | None = None  # a memory test: resident memory over what the child held before the import (resident)
    gave_back: int | None = None  # a memory test: how far its file-backed resident memory fell since then


def evaluate(grading: dict, problem: Problem, outcome: Outcome) -> TestResult:
    """Points and feedback for one test."""
    test = problem.test
    result = TestResult(test["name"], test["visibility"], 0.0, float(test["points"]), "failed", "", problem.describe())
    server = outcome.server
    if server is not None and server.error is not None:
        result.feedback = server.error if server.overflowed else f"refused: {server.error}"
        return result
    if outcome.status != "done":
        result.feedback = outcome.message
        return result
    outputs = _outputs(grading, problem, outcome)
    wrong = compare(problem, outputs)
    if wrong:
        result.feedback = wrong
        return result
    result.points, result.status, result.feedback = result.max_points, "passed", "correct"
    if server is not None and problem.fewest is not None:
        booked = server.chip.ledger.hbm_read_bytes + server.chip.ledger.hbm_write_bytes
        if booked < problem.fewest.hbm_bytes:
            result.review = problem.fewest.review(booked, problem.sram_bytes)
    if test["check"] == "memory":
        bound, whole = problem.memory_bound, 4 * problem.case["N"] * problem.case["Nk"]
        kept = _kept_in_hbm(grading, problem, server)
        if kept:
            result.points, result.status = 0.0, "failed"
            result.feedback = (
                f"correct, but you kept {kept} in HBM: half an N × Nk matrix or more, which FlashAttention never "
                "writes — keep S and P tile by tile in SRAM"
            )
        elif outcome.peak is None or outcome.peak > bound:
            result.points, result.status = 0.0, "failed"
            result.feedback = (
                f"correct, but your process held {human_bytes(outcome.peak or 0)} of NumPy/Python memory at its peak, "
                f"where this test allows {human_bytes(bound)} (4 × the SRAM + {human_bytes(bound - 4 * problem.sram_bytes)}); "
                f"one N × Nk float32 matrix here is {human_bytes(whole)} — build S and P tile by tile"
            )
        elif outcome.gave_back is not None and outcome.gave_back > GIVEN_BACK:
            result.points, result.status = 0.0, "failed"
            result.feedback = (
                f"correct, but your process gave back {human_bytes(outcome.gave_back)} of library pages (its "
                "file-backed resident memory, read by the grader from /proc, fell by that since the import), which the "
                "memory measure cannot allow: it would hold that much more unseen"
            )
        elif outcome.grown is not None and outcome.grown > whole // 2:
            result.points, result.status = 0.0, "failed"
            result.feedback = (
                f"correct, but your process's resident memory rose by {human_bytes(outcome.grown)} (read by the "
                f"grader from /proc; allowed half of one N × Nk float32 matrix, {human_bytes(whole // 2)}) — build S "
                "and P tile by tile"
            )
        else:
            result.feedback = f"correct, and your process's memory peaked at {human_bytes(outcome.peak)} (allowed {human_bytes(bound)})"
    elif test["check"] == "io":
        booked = server.chip.ledger.per_tensor()
        sizes = {name: a.nbytes for name, a in server.chip.hbm.tensors.items()}
        verdict = traffic.score(booked, sizes, problem.expected, set(problem.inputs), test.get("io_full", 1.0),
                                test.get("io_zero", 1.5), grading.get("io_hint", ""))  # fmt: skip
        result.points = round(result.max_points * verdict.fraction, 2)
        result.status = "passed" if verdict.fraction == 1 else "partial" if verdict.fraction > 0 else "failed"
        result.feedback = verdict.message if verdict.fraction == 1 else f"correct, but {verdict.message}"
        result.hbm_bytes = server.chip.ledger.hbm_read_bytes + server.chip.ledger.hbm_write_bytes
    return result


def _kept_in_hbm(grading: dict, problem: Problem, server: ChipServer | None) -> str:
    """The tensors a submission allocated in HBM beside its outputs, named with their shapes, where they hold
    N·Nk/2 elements or more (red team 104: S kept whole in the grader's HBM passed the process's memory test); ""."""
    if server is None:
        return ""
    own = {n: a.shape for n, a in server.chip.hbm.tensors.items() if n not in problem.inputs | grading["outputs"]}
    held = sum(int(np.prod(shape)) for shape in own.values())
    return (
        ", ".join(f"{n} {shape}" for n, shape in own.items())
        if 2 * held >= problem.case["N"] * problem.case["Nk"]
        else ""
    )


def _outputs(grading: dict, problem: Problem, outcome: Outcome) -> dict[str, np.ndarray | str]:
    """Each answer's name → the array to check, or a line saying why there is none."""
    if outcome.server is None:
        names = list(problem.reference)
        if len(outcome.results) != len(names):
            return {
                names[0]: f"returned {len(outcome.results)} arrays where {len(names)} ({', '.join(names)}) are expected"
            }
        return dict(zip(names, outcome.results, strict=True))
    out: dict[str, np.ndarray | str] = {}
    input_dtype = problem.inputs["Q"].dtype
    for name, kind in grading["outputs"].items():
        array = outcome.server.output(name)
        want = input_dtype if kind == "input" else DTYPES[kind]
        shape = problem.inputs["K" if name in ("dK", "dV") else "Q"].shape[: 1 if kind != "input" else 2]
        if array is None:
            out[name] = f"{name} was never allocated in HBM"
        elif array.dtype != want or array.shape != shape:
            out[name] = f"{name} is {array.dtype} {array.shape} in HBM; it must be {want} {shape}"
        elif np.isnan(array.astype(np.float32)).any():
            rows = int(np.isnan(array.astype(np.float32)).reshape(len(array), -1).any(axis=1).sum())
            out[name] = f"{name} has {rows} rows never written (still NaN)"
        else:
            out[name] = array
    if "ℓ" in out and "m" in out and not isinstance(out["ℓ"], str) and not isinstance(out["m"], str):
        with np.errstate(divide="ignore", invalid="ignore"):  # a submission's ℓ ≤ 0: no warning on the terminal
            out["ℓ"] = np.where(
                out["ℓ"] > 0, out["m"].astype(np.float64) + np.log(out["ℓ"].astype(np.float64)), -np.inf
            )
    elif isinstance(out.get("m"), str):
        out["ℓ"] = out["m"]
    return out


def compare(problem: Problem, outputs: dict) -> str:
    """ "" if every answer is within its bound, else the first one that is not, with its worst element."""
    for name, want in problem.reference.items():
        got = outputs.get(name)
        if isinstance(got, str):
            return got
        label = "m + log ℓ" if name == "ℓ" and "m" not in problem.reference else name
        got = np.asarray(got, dtype=np.float64)
        if got.shape != want.shape:
            return f"{label} has shape {got.shape}; expected {want.shape}"
        if name in ("L", "ℓ", "m"):
            if not np.array_equal(np.isneginf(got), np.isneginf(want)) or np.isnan(got).any():
                bad = int(np.flatnonzero((np.isneginf(got) != np.isneginf(want)) | np.isnan(got))[0])
                return f"{label}[{bad}] is {got[bad]:.6g} where the reference is {want[bad]:.6g} (−∞ marks a row with no key)"
            got, want = np.where(np.isfinite(want), got, 0.0), np.where(np.isfinite(want), want, 0.0)
        err = np.abs(got - want)
        bound = problem.bounds.get(name, _relative(want))
        if not np.isfinite(got).all() or (err > bound).any():
            index = np.unravel_index(
                int(np.argmax(np.where(np.isfinite(err), err / np.maximum(bound, 1e-300), np.inf))), err.shape
            )
            where = f"[{', '.join(str(int(i)) for i in index)}]"
            limit = np.broadcast_to(bound, err.shape)[index]
            return f"{label}{where} is {got[index]:.6g} where the reference is {want[index]:.6g} (error {abs_error(err[index], 2)}, allowed {abs_error(limit, 2)})"
    return ""


def _relative(want: np.ndarray) -> np.ndarray:
    """The online softmax's bound: float64 arithmetic, 1e-10 of each value (m exact: a max is exact)."""
    return 1e-10 * np.abs(np.where(np.isfinite(want), want, 0.0))
