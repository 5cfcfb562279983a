"""`grade`: every test of an assignment against every submission, each submission in its own confined process."""

import os
import secrets
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sim.core.errors import InputError
from sim.grading import export, guard, isolation, journal, problem, resident, sandbox, similarity, stream, violations
from sim.grading.checks import Outcome, evaluate
from sim.grading.problem import Problem
from sim.grading.proxy import tensor_specs
from sim.grading.report import SubmissionReport, TestResult, made_printable, one_line
from sim.grading.server import ChipServer
from sim.grading.spec import Assignment
from sim.grading.submission_file import Refused, refusal
from sim.grading.triton import grade as triton

START_S = 5.0  # seconds beyond a test's time that starting a child and importing the submission may take
MAX_DEATHS = 2  # a submission whose process dies this often has its remaining tests marked "not run"
SOLUTIONS = guard.SOLUTIONS


def isolate(assignment: Assignment, submissions: list[Path], limits: sandbox.Limits = sandbox.DEFAULT_LIMITS, *,
            allow_weak: bool = False, self_check: bool = False) -> isolation.Isolation:  # fmt: skip
    """The walls this run's children get (probed); InputError if the kernel's are missing and that is not allowed."""
    forbidden = [str(p) for p in _forbidden(assignment, submissions, self_check)]
    return isolation.prepare(assignment.grading["driver"], forbidden, limits, allow_weak=allow_weak,
                             self_check=self_check)  # fmt: skip


def grade(
    assignment: Assignment,
    submissions: list[Path],
    *,
    seed: int | None = None,
    jobs: int | None = None,
    limits: sandbox.Limits = sandbox.DEFAULT_LIMITS,
    self_check: bool = False,
    progress=None,
    walls: isolation.Isolation | None = None,
    record: Path | None = None,
) -> list[SubmissionReport]:
    """Grade each submission (in parallel, `jobs` at a time) on this run's cases; `self_check` runs public tests only.
    `walls`: the run's isolation (`isolate`'s, probed here if not given); `record`: a journal file that keeps each
    graded submission, so that a run interrupted half-way and started again grades only the rest."""
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise InputError(f"seed: must be a whole number, 0 or more; got {seed!r}")
    if self_check:
        assignment = assignment.public()
    else:  # a misspelt or unclosed marker: refused before any submission runs, not after the batch (similarity's)
        export.check_markers(assignment.path.read_text(encoding="utf-8"), assignment.path.name)
    unavailable = gpu_missing(assignment)
    run_head = journal.run(assignment, limits, ran=unavailable is None)  # what the grades depend on, but the seed
    done, seed = journal.kept(record, run_head, seed, submissions) if record else ({}, seed)
    seed = secrets.randbelow(2**31) if seed is None else seed
    problems = [problem.make(assignment.grading, t, seed) for t in assignment.tests]
    setup = _setup(assignment, submissions, self_check)
    if unavailable is None and walls is None:
        walls = isolate(assignment, submissions, limits, self_check=self_check)

    def one(path: Path) -> SubmissionReport:
        if path.name in done:
            return done[path.name]
        start = time.perf_counter()
        if unavailable is not None:
            report = SubmissionReport(path.name, assignment.name, seed, notes=[unavailable])
            report.tests = [_result(p, 0.0, "skipped", unavailable) for p in problems]
        else:
            try:
                report = grade_one(assignment, problems, path, seed, limits, setup, walls)
            except Exception as e:  # a fault of the grader's own must cost one submission, never the batch
                report = SubmissionReport(path.name, assignment.name, seed)
                line = f"not graded: the grader failed on this submission ({type(e).__name__}: {str(e)[:200]})"
                report.tests = [_result(p, 0.0, "not run", line) for p in problems]
            if walls.weak and not self_check:
                report.notes.append(isolation.WEAK)
        report.master = str(assignment.path)
        report = made_printable(report)  # what the submission said, shown to no terminal or file as it is
        report.seconds = time.perf_counter() - start
        if sandbox.STOPPING.is_set():  # interrupted under it: not graded, so not recorded
            return report
        if record:
            journal.append(record, report, path)
        if progress is not None:
            progress(report)
        return report

    if record:
        journal.start(record, run_head, seed)
    reports = _in_parallel(one, submissions, jobs or os.cpu_count() or 1)
    if len(submissions) > 1 and not self_check:  # a batch, graded by its instructor: never shown on Gradescope
        similarity.annotate(assignment, submissions, reports)  # flags for a person to review; no points taken
    return reports


def _in_parallel(one, submissions: list[Path], jobs: int) -> list[SubmissionReport]:
    """`one` on every submission, `jobs` at a time; on SIGINT or SIGTERM every child is killed (their folders
    removed as their threads close them) before the interruption goes on."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _interrupt) if main else None
    pool, futures = ThreadPoolExecutor(max_workers=jobs), []
    try:
        futures = [pool.submit(one, path) for path in submissions]
        return [f.result() for f in futures]
    except BaseException:
        sandbox.stop_all()
        for f in futures:
            f.cancel()
        raise
    finally:
        pool.shutdown(wait=True)
        sandbox.STOPPING.clear()
        if main:
            signal.signal(signal.SIGTERM, before)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


def grade_one(
    assignment: Assignment, problems: list[Problem], path: Path, seed: int, limits, setup: dict, walls
) -> SubmissionReport:
    """All tests of one submission; its process is started again after a death, at most MAX_DEATHS times."""
    report = SubmissionReport(path.name, assignment.name, seed)
    child, deaths, base = None, 0, None
    stop = refusal(path, sandbox.within(limits).file_bytes)  # a pipe, a link, a device, too large
    if not stop and assignment.grading["driver"] == "triton":  # its file read and compiled before anything of it runs
        stop = triton.refusal(path, assignment.grading, [p.case for p in problems])
    try:
        for p in problems:
            if stop:
                report.tests.append(_result(p, 0.0, "not run", stop))
                continue
            if child is None:
                try:
                    child = violations.watch(sandbox.Child(path, limits, walls.settings))
                except Refused as e:  # replaced by a pipe or a link since the check above
                    stop = f"not run: {e}"
                    report.tests.append(_result(p, 0.0, "not run", stop))
                    continue
                header, base = _start(child, setup, walls, report)
                report.printed = child.printed_text()
                if header["op"] != "ready":
                    stop = (
                        f"could not import the submission: {_raised(header) if 'type' in header else header['message']}"
                    )
                    report.tests.append(_result(p, 0.0, "failed", stop))
                    _flag(report, child)
                    continue
            outcome = run(child, assignment.grading, p, limits, base, walls)
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


def _start(child: sandbox.Child, setup: dict, walls, report: SubmissionReport) -> tuple[dict, int | None]:
    """A new child's walls must be the run's (said before any of the submission ran); then what it holds resident
    (`resident.mark`), and only then the hello, on which it imports the submission: a buffer the submission's import
    touched before the mark would be in the base, and hold a memory test's matrix unseen."""
    base = None
    try:
        start_s = child.limits.wall_s + START_S  # a process to start and confine, NumPy to import, then the file
        header, _ = child.exchange({}, wall_s=start_s)
        if header["op"] != "confined" or header["layers"] != list(walls.layers):
            got = header.get("layers", header["op"])
            message = f"its process was not confined as the run's probe was ({got})"
            return {"op": "import_failed", "message": message}, None
        report.confine_ms.append(header["ms"])
        base = resident.mark(child.proc.pid)
        header, _ = child.exchange({**setup, "file": str(child.file), "seal": resident.SEAL}, wall_s=start_s)
        if header["op"] not in ("ready", "import_failed", "raised"):  # (red team 104: a "done" sent by the import)
            child.kill("protocol")
            header = {"op": "import_failed", "message": f"its process answered {header['op']!r} to the import"}
    except sandbox.ChildDied as e:
        header = {"op": "import_failed", "message": str(e)}
    return header, base


def run(child: sandbox.Child, grading: dict, p: Problem, limits, base=None, walls=None) -> Outcome:
    """One test in the submission's process: send it, serve its requests, collect how it ended; for a memory test
    also how far its resident memory rose above `base` (what it held before the submission was imported); for a GPU
    test, the source it sent compiled and run in another process of the run's `walls` (`kernel_run`)."""
    driver = grading["driver"]
    header = {"op": "test", "trace_memory": p.test["check"] == "memory", "entry": grading.get("entry")}
    server, column, arrays = None, None, list(p.inputs.values())
    if driver == "chip":
        server, arrays = ChipServer(p.sram_bytes, p.inputs), []
        header |= {"driver": "chip", "kwargs": p.kwargs, "sram_bytes": p.sram_bytes, "tensors": tensor_specs(p.inputs)}
    elif driver == "gpu":  # its process gets no input: it only hands in its source
        header["driver"], arrays = "gpu", []
    elif driver == "triton":
        header |= triton.header(p, grading)
    elif p.test["check"] == "update":  # X stays here: its columns are served one at a time
        column, arrays = stream.ColumnServer(p), []
        header |= {"driver": "update", "shape": list(p.inputs["X"].shape)}
    else:
        header["driver"] = p.test["check"]
    serve = (server or column).handle if server or column else None
    wall_s = p.test.get("timeout_s", grading.get("timeout_s", limits.wall_s))
    try:
        reply, results = child.exchange(header, arrays, serve, wall_s)
        if driver == "gpu" and reply["op"] == "done":
            from sim.grading import kernel_run

            reply, results = kernel_run.run(child, reply, walls, p, limits, wall_s)
    except sandbox.ChildDied as e:
        return Outcome("died", str(e), server=server)
    if column is not None and column.error is not None:
        return Outcome("raised", column.error)
    if reply["op"] == "raised":
        return Outcome("raised", _raised(reply), server=server)
    if reply["op"] != "done":
        return Outcome("died", f"sent {reply['op']!r} where the grader expected the test's end", server=server)
    if p.test["check"] != "memory":
        return Outcome("done", "", results, reply.get("peak"), server)
    held, why = resident.held_by(child.proc)  # read from outside: a test fails closed where it cannot be
    if held is None or base is None:
        why = f"{why} right after its answer" if held is None else "its memory could not be read before the import"
        return Outcome("died", f"{why}: a memory test needs its resident memory, read from outside", server=server)
    return Outcome("done", "", results, reply.get("peak"), server, held.held - base.held, base.files - held.files)


def _raised(reply: dict) -> str:
    """The submission's exception in one line: "not implemented yet: hint", or its type, message and line (each the
    child's text, its line breaks made spaces)."""
    kind, message, where = (one_line(str(reply.get(k, ""))[:400]) for k in ("type", "message", "where"))
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
    """Copy the child's guard violations into the report's flags (`violations.flag`); whether there are any."""
    return violations.flag(report, child)


def _setup(assignment: Assignment, submissions: list[Path], self_check: bool) -> dict:
    """The hello message: modules the child may not import, paths it may not open (the guard names what was tried)."""
    forbid = [*guard.SOLUTION_MODULES, *assignment.grading.get("forbid", [])]
    denied = [(p, guard.LISTING) for p in guard.denied_paths(forbid)]
    denied += [(str(p) + os.sep, SOLUTIONS) for p in _private(assignment)]
    denied += [(str(Path(guard.__file__).with_name("samples.py")), SOLUTIONS)]
    if not self_check:
        denied += [(str(Path(s).parent.resolve()) + os.sep, guard.OTHERS) for s in submissions]  # not a link's
    environment = {"TRITON_INTERPRET": "1"} if assignment.grading["driver"] == "triton" else {}
    return {"op": "hello", "forbid": forbid, "denied": sorted(set(denied)), "environment": environment}


def _private(assignment: Assignment) -> list[Path]:
    """The master's folder, and in a source checkout lessons/, tests/ and .git."""
    root = Path(guard.__file__).resolve().parents[2]
    names = ("lessons", "tests", ".git") if (root / "pyproject.toml").is_file() else ()
    return [assignment.path.resolve().parent, *(root / name for name in names if (root / name).exists())]


def _forbidden(assignment: Assignment, submissions: list[Path], self_check: bool = False) -> list[Path]:
    """What no child's read set may reach: the library's solutions, the master and private folders, submissions.
    A self-check's "master" is the student's own copy: its folder (wherever they keep it) is nothing to hide."""
    forbid = [*guard.SOLUTION_MODULES, *assignment.grading.get("forbid", [])]
    solutions = [Path(p.rstrip(os.sep)) for p in guard.denied_paths(forbid) if not p.endswith(".")]
    private = _private(assignment)[1:] if self_check else _private(assignment)
    entries = [Path(s).parent.resolve() / Path(s).name for s in submissions]  # a link's own path, not its target's
    return [*solutions, assignment.path.resolve(), *private, *entries]


def gpu_missing(assignment: Assignment) -> str | None:
    """For a GPU assignment on a machine without one, the line that says so; None otherwise."""
    if assignment.grading["driver"] == "triton":
        return triton.missing(assignment.name)
    if assignment.grading["driver"] != "gpu":
        return None
    import gpu

    ok, reason = gpu.available()
    return None if ok else f"not graded here: {assignment.name} needs an NVIDIA GPU and CuPy ({reason})"
