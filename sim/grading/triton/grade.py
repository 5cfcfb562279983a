"""Where the Triton assignment plugs into `flashsim grade`: the checks before any test, a test's header, its score.

Before the submission's process starts, its file is read (the allow-list) and its kernels are
compiled for a GPU target in a fresh process; a file refused by either gets every test "not run"
with the reason. Each test then runs in the submission's process like every other assignment's
(`sim.grading.harness`, driver "triton"), under the same confinement.
"""

import importlib.util
from pathlib import Path

from sim.core.errors import InputError
from sim.grading.checks import Outcome
from sim.grading.problem import Problem
from sim.grading.report import TestResult
from sim.grading.triton import allowlist, compile_check, launch, score

INSTALL = "pip install 'flashsim[assignments-triton]'"


def missing(name: str) -> str | None:
    """Where Triton is not installed, the line that says so; None where it is."""
    if importlib.util.find_spec("triton") is None:
        return f"not graded here: {name} needs Triton ({INSTALL}; Linux x86_64 or aarch64)"
    return None


def refusal(path: Path, grading: dict) -> str:
    """ "" for a kernel file the tests may run, else why not in one line."""
    try:
        stubs = allowlist.check(Path(path).read_text(encoding="utf-8"), Path(path).name)
    except (OSError, UnicodeDecodeError) as e:
        return f"refused: cannot read the kernel file ({e})"
    except InputError as e:
        return f"refused: {e}"
    reason = compile_check.error(Path(path), grading, skip=stubs)  # a stub: the tests say "not implemented yet"
    return f"refused: {reason}" if reason else ""


def header(problem: Problem, grading: dict) -> dict:
    """The test's message to the submission's process."""
    return {"driver": "triton", **settings(problem, grading)}


def settings(problem: Problem, grading: dict) -> dict:
    return launch.plan(problem.case, list(problem.inputs), grading.get("pass") == "backward")


def evaluate(grading: dict, problem: Problem, outcome: Outcome) -> TestResult:
    """Points and feedback for one test."""
    return score.evaluate(grading, problem, outcome, settings(problem, grading))
