"""Where the Triton assignment plugs into `flashsim grade`: the checks before any test, a test's header, its score.

Before the submission's process starts, its file is read (the allow-list) and its kernels are
compiled for a GPU target in a fresh process; a file refused by either gets every test "not run"
with the reason. Each test then runs in the submission's process like every other assignment's
(`sim.grading.harness`, driver "triton"), under the same confinement.
"""

import importlib.util
import tempfile
from pathlib import Path

from sim.core.errors import InputError
from sim.grading import submission_file
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


def refusal(path: Path, grading: dict, cases: list[dict] = ()) -> str:
    """ "" for a kernel file the tests may run, else why not in one line; the compile check gets the bytes read here
    (`submission_file.read`), copied to a folder of its own, and compiles at each of `cases` (the tests')."""
    try:
        source = submission_file.read(path)
        stubs = allowlist.check(source.decode("utf-8"), Path(path).name)
    except submission_file.Refused as e:
        return f"not run: {e}"
    except UnicodeDecodeError as e:
        return f"refused: cannot read the kernel file ({e})"
    except InputError as e:
        return f"refused: {e}"
    with tempfile.TemporaryDirectory(prefix="flashsim-triton-") as folder:
        (copy := Path(folder) / Path(path).name).write_bytes(source)
        reason = compile_check.error(copy, grading, cases, skip=stubs)  # a stub: the tests say "not implemented yet"
    return f"refused: {reason}" if reason else ""


def header(problem: Problem, grading: dict) -> dict:
    """The test's message to the submission's process."""
    return {"driver": "triton", **settings(problem, grading)}


def settings(problem: Problem, grading: dict) -> dict:
    return launch.plan(problem.case, list(problem.inputs), grading.get("pass") == "backward")


def evaluate(grading: dict, problem: Problem, outcome: Outcome) -> TestResult:
    """Points and feedback for one test."""
    return score.evaluate(grading, problem, outcome, settings(problem, grading))
