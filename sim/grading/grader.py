"""`grade`: every test of an assignment against every submission, each submission in its own guarded process."""

import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sim.core.errors import InputError
from sim.grading import guard, problem, sandbox, similarity
from sim.grading.checks import Outcome, evaluate
from sim.grading.problem import Problem
from sim.grading.proxy import tensor_specs
from sim.grading.report import SubmissionReport, TestResult
from sim.grading.server import ChipServer
from sim.grading.spec import Assignment
from sim.grading.triton import grade as triton

MAX_DEATHS = 2  # a submission whose process dies this often has its remaining tests marked "not run"
SOLUTIONS = "tried to read the instructor solutions"


def submissions_in(path: Path) -> list[Path]:
    """A submission file, or the `.py` files of a folder (one submission each), sorted by name."""
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.glob("*.py") if not p.name.startswith("."))
        if found:
            return found
        raise InputError(f"submission: the folder {path} holds no .py files")
    raise InputError(f"submission: no file or folder {path}")


def grade(
    assignment: Assignment,
    submissions: list[Path],
    *,
    seed: int | None = None,
    jobs: int | None = None,
    limits: sandbox.Limits = sandbox.DEFAULT_LIMITS,
    self_check: bool = False,
    progress=None,
) -> list[SubmissionReport]:
    """Grade each submission (in parallel, `jobs` at a time) on this run's cases; `self_check` runs public tests only."""
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise InputError(f"seed: must be a whole number, 0 or more; got {seed!r}")
    if self_check:
        assignment = assignment.public()
    seed = secrets.randbelow(2**31) if seed is None else seed
    problems = [problem.make(assignment.grading, t, seed) for t in assignment.tests]
    unavailable = _gpu_missing(assignment)
    setup = _setup(assignment, submissions, self_check)
    if assignment.grading["driver"] == "gpu" and unavailable is None:
        limits = sandbox.Limits(limits.wall_s, limits.cpu_s, 0, limits.output_bytes, limits.file_bytes)

    def one(path: Path) -> SubmissionReport:
        start = time.perf_counter()
        if unavailable is not None:
            report = SubmissionReport(path.name, assignment.name, seed, notes=[unavailable])
            report.tests = [_result(p, 0.0, "skipped", unavailable) for p in problems]
        else:
            report = grade_one(assignment, problems, path, seed, limits, setup)
        report.seconds = time.perf_counter() - start
        if progress is not None:
            progress(report)
        return report

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        reports = list(pool.map(one, submissions))
    if len(submissions) > 1 and not self_check:  # a batch, graded by its instructor: never shown on Gradescope
        similarity.annotate(assignment, submissions, reports)  # flags for a person to review; no points taken
    return reports


def grade_one(
    assignment: Assignment, problems: list[Problem], path: Path, seed: int, limits, setup: dict
) -> SubmissionReport:
    """All tests of one submission; its process is started again after a death, at most MAX_DEATHS times."""
    report = SubmissionReport(path.name, assignment.name, seed)
    child, deaths, stop = None, 0, ""
    if assignment.grading["driver"] == "triton":  # its file read and compiled before anything of it runs
        stop = triton.refusal(path, assignment.grading)
    try:
        for p in problems:
            if stop:
                report.tests.append(_result(p, 0.0, "not run", stop))
                continue
            if child is None:
                child = sandbox.Child(path, limits)
                try:
                    header, _ = child.exchange({**setup, "file": str(child.file)})
                except sandbox.ChildDied as e:
                    header = {"op": "import_failed", "message": str(e)}
                report.printed = child.printed_text()
                if header["op"] != "ready":
                    stop = (
                        f"could not import the submission: {_raised(header) if 'type' in header else header['message']}"
                    )
                    report.tests.append(_result(p, 0.0, "failed", stop))
                    _flag(report, child)
                    continue
            outcome = run(child, assignment.grading, p, limits)
            score = triton.evaluate if assignment.grading["driver"] == "triton" else evaluate
            report.tests.append(score(assignment.grading, p, outcome))
            report.printed = child.printed_text()
            if _flag(report, child):
                stop = f"not run: the submission {SOLUTIONS}"
            elif outcome.status == "died":
                child.close()
                child, deaths = None, deaths + 1
                if deaths >= MAX_DEATHS:
                    stop = f"not run: the submission's process died {deaths} times (last: {outcome.message})"
    finally:
        if child is not None:
            child.close()
    return report


def run(child: sandbox.Child, grading: dict, p: Problem, limits) -> Outcome:
    """One test in the submission's process: send it, serve its requests, collect how it ended."""
    driver = grading["driver"]
    header = {"op": "test", "trace_memory": p.test["check"] == "memory", "entry": grading.get("entry")}
    server, arrays = None, list(p.inputs.values())
    if driver == "chip":
        server, arrays = ChipServer(p.sram_bytes, p.inputs), []
        header |= {"driver": "chip", "kwargs": p.kwargs, "sram_bytes": p.sram_bytes, "tensors": tensor_specs(p.inputs)}
    elif driver == "gpu":
        from sim.grading import gpu_kernel

        header |= {"driver": "gpu", **gpu_kernel.launch_settings(p)}
    elif driver == "triton":
        header |= triton.header(p, grading)
    else:
        header["driver"] = p.test["check"]
    try:
        reply, results = child.exchange(
            header,
            arrays,
            server.handle if server else None,
            p.test.get("timeout_s", grading.get("timeout_s", limits.wall_s)),
        )
    except sandbox.ChildDied as e:
        return Outcome("died", str(e), server=server)
    if reply["op"] == "raised":
        return Outcome("raised", _raised(reply), server=server)
    if reply["op"] != "done":
        return Outcome("died", f"sent {reply['op']!r} where the grader expected the test's end", server=server)
    return Outcome("done", "", results, reply.get("peak"), server)


def _raised(reply: dict) -> str:
    """The submission's exception in one line: "not implemented yet: hint", or its type, message and line."""
    kind, message, where = (str(reply.get(k, ""))[:400] for k in ("type", "message", "where"))
    at = f" ({where})" if where else ""
    if kind == "NotImplementedError":
        return f"not implemented yet: {message}" if message else f"not implemented yet{at}"
    if kind == "MemoryError":
        return f"ran out of memory: MemoryError{at}"
    if kind == "SystemExit":
        return f"{message}{at}"
    return f"raised {kind}: {message}{at}" if message else f"raised {kind}{at}"


def _result(p: Problem, points: float, status: str, feedback: str) -> TestResult:
    return TestResult(p.name, p.test["visibility"], points, float(p.test["points"]), status, feedback, p.describe())


def _flag(report: SubmissionReport, child: sandbox.Child) -> bool:
    """Copy the child's guard violations into the report's flags; whether there are any."""
    for v in child.violations:
        line = f"{v.get('what', SOLUTIONS)}: {str(v.get('detail', ''))[:200]}"
        if line not in report.flags:
            report.flags.append(line)
    return bool(report.flags)


def _setup(assignment: Assignment, submissions: list[Path], self_check: bool) -> dict:
    """The hello message: modules the child may not import, paths it may not open."""
    forbid = [*guard.SOLUTION_MODULES, *assignment.grading.get("forbid", [])]
    denied = [(p, "imported the library's solution") for p in guard.denied_paths(forbid)]
    private = [assignment.path.resolve().parent]
    root = Path(guard.__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():
        private += [root / name for name in ("lessons", "tests", ".git") if (root / name).exists()]
    denied += [(str(p) + os.sep, SOLUTIONS) for p in private]
    denied += [(str(Path(guard.__file__).with_name("samples.py")), SOLUTIONS)]
    if not self_check:
        denied += [(str(Path(s).resolve().parent) + os.sep, "tried to read other submissions") for s in submissions]
    environment = {"TRITON_INTERPRET": "1"} if assignment.grading["driver"] == "triton" else {}
    return {"op": "hello", "forbid": forbid, "denied": sorted(set(denied)), "environment": environment}


def _gpu_missing(assignment: Assignment) -> str | None:
    """For a GPU assignment on a machine without one, the line that says so; None otherwise."""
    if assignment.grading["driver"] == "triton":
        return triton.missing(assignment.name)
    if assignment.grading["driver"] != "gpu":
        return None
    import gpu

    ok, reason = gpu.available()
    return None if ok else f"not graded here: {assignment.name} needs an NVIDIA GPU and CuPy ({reason})"
