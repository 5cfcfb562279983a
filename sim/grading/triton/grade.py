"""Where the Triton assignment plugs into `flashsim grade`: the checks before any test, a test's header, its score.

Before the submission's process starts, its file is read (the allow-list) and its kernels are
compiled for a GPU target, both in a fresh process; a file refused by either gets every test "not run"
with the reason. Each test then runs in the submission's process like every other assignment's
(`sim.grading.harness`, driver "triton"), under the same confinement.
"""

import importlib.util
import tempfile
from pathlib import Path

from sim.grading import submission_file
from sim.grading.checks import Outcome
from sim.grading.problem import Problem
from sim.grading.report import TestResult
from sim.grading.triton import compile_check, launch, score

INSTALL = "pip install 'flashsim[assignments-triton]'"
MAX_BYTES = 64 * 1024  # a kernel file: the masters are 8–12 KB


def missing(name: str) -> str | None:
    """Where Triton is not installed, the line that says so; None where it is."""
    if importlib.util.find_spec("triton") is None:
        return f"not graded here: {name} needs Triton ({INSTALL}; Linux x86_64 or aarch64)"
    return None


def refusal(path: Path, grading: dict, cases: list[dict] = ()) -> str:
    """ "" for a kernel file the tests may run, else why not in one line. The bytes read here
    (`submission_file.read`, at most MAX_BYTES), copied to a folder of their own, are parsed (the allow-list) and
    compiled at each of `cases` (the tests') by `compile_check`'s process: Python's parser holds the GIL (a 1 MiB
    f-string took 111 s in 3.11), and in the grader's process it would stall every grading thread."""
    try:
        source = submission_file.read(path)
        source.decode("utf-8")
    except submission_file.Refused as e:
        return f"not run: {e}"
    except UnicodeDecodeError as e:
        return f"refused: cannot read the kernel file ({e})"
    if len(source) > MAX_BYTES:
        return f"refused: a kernel file of {len(source):,} bytes; at most {MAX_BYTES:,}"
    with tempfile.TemporaryDirectory(prefix="flashsim-triton-") as folder:
        (copy := Path(folder) / Path(path).name).write_bytes(source)
        reason = compile_check.error(copy, grading, cases)  # a stub: the tests say "not implemented yet"
    return f"refused: {reason}" if reason else ""


def header(problem: Problem, grading: dict) -> dict:
    """The test's message to the submission's process."""
    return {"driver": "triton", **settings(problem, grading)}


def settings(problem: Problem, grading: dict) -> dict:
    return launch.plan(problem.case, list(problem.inputs), grading.get("pass") == "backward")


def evaluate(grading: dict, problem: Problem, outcome: Outcome) -> TestResult:
    """Points and feedback for one test."""
    return score.evaluate(grading, problem, outcome, settings(problem, grading))
