"""`flashsim assignments list|export`, `flashsim grade`, `flashsim bench grade`: the grader's commands."""

import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import click
from rich.table import Table

from sim.cli import estimate, options
from sim.cli.options import console, emit_json
from sim.cli.progress import Work
from sim.core import atomic_file
from sim.core.errors import InputError
from sim.core.format import count, seconds
from sim.grading import bench as grading_bench
from sim.grading import csvfile, export, grader, gradescope, render, sandbox, spec, submission_file
from sim.grading.report import shown_name
from sim.lab import course
from sim.viz.unclipped import unclipped

TIMEOUT = options.FloatRange(0.1, 3600)  # seconds per test: an hour is far beyond any test, NaN and ∞ are no limit
MAX_JOBS = max(64, 4 * (os.cpu_count() or 1))  # more only queue for the CPUs (and each holds memory)
JOBS = click.option("--jobs", type=options.Count(1, MAX_JOBS), default=None,
                    help="Submissions graded at once  [default: CPUs]")  # fmt: skip


def journal_file(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """A click callback: --journal names a regular file or none yet (a device never ends, a pipe blocks)."""
    if path and (path.startswith(("/dev/", "/proc/")) or (os.path.lexists(path) and not os.path.isfile(path))):
        what = atomic_file.kind(os.stat(path).st_mode) if os.path.exists(path) else "not a regular file"
        raise click.BadParameter(f"{path!r} is {what}; a journal is a regular file")
    return options.writable(ctx, param, path)


@click.group("assignments")
def assignments() -> None:
    """The graded assignments: list them, export the student's or the instructor's copy."""


@assignments.command("list")
def list_command() -> None:
    """The assignments in lessons/assignments, with their tests and points (an install's: the student copies)."""
    masters, table = course.masters_here(), Table(show_edge=False)
    columns = ("public", "hidden", "points") if masters else ("public", "public points")  # a copy holds no hidden test
    for name in ("assignment", "title", *columns):
        table.add_column(name)
    for path in spec.masters():
        a = spec.load(path)
        public = sum(t["visibility"] == "public" for t in a.tests)
        table.add_row(a.name, a.title, str(public), *([str(len(a.tests) - public)] if masters else []), f"{a.points:g}")
    console.print(unclipped(table))
    if not masters:
        console.print(f"these are the student copies ({course.assignments()}): public tests only, no solutions; the "
                      "masters are in a checkout of flashsim", markup=False, soft_wrap=True)  # fmt: skip


@assignments.command("export")
@click.argument("assignment")
@options.output_folder("--student", "student", "Write the student's copy here (a folder, made if missing).")
@options.output_folder("--instructor", "instructor",
                       "Write the master here, with a Gradescope autograder folder beside it.")  # fmt: skip
def export_command(assignment, student, instructor) -> None:
    """Export ASSIGNMENT (a name such as 02, or a master's path) for students or for the instructor."""
    master = spec.locate(assignment)
    if instructor:
        course.needs_master(master, "assignments export --instructor", "the instructor's copy")
    spec.load(master)
    path = export.export(master, student=student and Path(student), instructor=instructor and Path(instructor))
    what = "student's copy (stubs, public tests)" if student else "master, and autograder/ for Gradescope"
    console.print(f"wrote {path}: the {what}", markup=False)


@click.command("grade")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--self-check",
    is_flag=True,
    help="Public tests only (a student's own check): of the one FILE given, or of SUBMISSION against ASSIGNMENT.",
)
@click.option("--seed", type=options.Count(0, 2**64 - 1), default=None,
              help="Seed of this run's cases  [default: a fresh one, printed]")  # fmt: skip
@JOBS
@click.option("--timeout", type=TIMEOUT, default=10.0, show_default=True,
              help="Seconds per test: the submission's CPU time, the grader's for it, its sleeps (wall clock: 5×).")  # fmt: skip
@options.output_file("--gradescope", "gradescope_path", "Write Gradescope's results.json here (one submission).")
@click.option("--hidden-visibility", type=click.Choice(gradescope.VISIBILITY), default="hidden", show_default=True,
              help="Gradescope visibility of the hidden tests.")  # fmt: skip
@options.output_file("--csv", "csv_path", "Write one row per submission here.")
@click.option("--journal", "journal_path", type=click.Path(dir_okay=False), default=None, callback=journal_file,
              help="Record each graded submission here; run again with it to resume an interrupted batch.")  # fmt: skip
@click.option("--allow-weak-isolation", is_flag=True,
              help="Grade even where the kernel cannot confine submissions (no Landlock or seccomp); reports say so.")  # fmt: skip
@click.option("--details", is_flag=True, help="For a folder: every submission's table, not only the summary.")
@options.QUIET
def grade_command(
    paths, self_check, seed, jobs, timeout, gradescope_path, hidden_visibility, csv_path, journal_path,
    allow_weak_isolation, details, quiet,
) -> None:  # fmt: skip
    """Grade SUBMISSION (a .py file, or a folder of them) against ASSIGNMENT (a name such as 02, or a master's path).

    flashsim grade ASSIGNMENT SUBMISSION; flashsim grade --self-check FILE (a student's copy, public tests).
    """
    if len(paths) == 1 and self_check:
        if not os.path.isfile(paths[0]):
            raise InputError(f"--self-check: no file {paths[0]!r} (give the student's copy of the assignment)")
        paths = (paths[0], paths[0])
    if len(paths) != 2:
        raise InputError("grade: give ASSIGNMENT and SUBMISSION (or --self-check FILE)")
    master = spec.locate(paths[0])
    assignment = spec.load(master if self_check else course.needs_master(master, "grade", "grading"))
    if not self_check and all(t["visibility"] == "public" for t in assignment.tests):
        console.print(f"note: {assignment.path.name} holds no hidden test (a student's copy rather than the master?): "
                      f"only its {len(assignment.tests)} public tests are graded", style="yellow", markup=False)  # fmt: skip
    found = submission_file.submissions_in(Path(paths[1]))
    if gradescope_path and len(found) > 1:
        named = [p for p in found if p.name == assignment.path.name]
        if len(named) != 1:
            raise InputError(f"--gradescope: grades one submission; {paths[1]} holds {len(found)} .py files")
        found = named
    outputs = {"--gradescope": gradescope_path, "--csv": csv_path, "--journal": journal_path}
    apart(outputs, assignment.path, found, Path(paths[1]))
    many = len(found) > 1
    jobs = at_once(len(found), jobs)
    limits = sandbox.Limits(wall_s=timeout)
    walls = None
    if grader.gpu_missing(assignment) is None:
        walls = grader.isolate(assignment, found, limits, allow_weak=allow_weak_isolation, self_check=self_check)
        console.print(walls.line(), style="yellow" if walls.weak else "dim", highlight=False, soft_wrap=True)
    with progress_bar(quiet, len(found), each=many) as progress:
        reports = grader.grade(assignment, found, seed=seed, jobs=jobs, limits=limits, self_check=self_check,
                               progress=progress, walls=walls, record=journal_path and Path(journal_path))  # fmt: skip
    for r in reports if (details or not many) else []:
        console.print(render.submission(r, self_check))
    if many:
        console.print(render.summary(reports))
    if gradescope_path:
        with atomic_file.target(gradescope_path) as where:
            gradescope.write(reports[0], Path(where), hidden_visibility)
        console.print(f"wrote {gradescope_path}", markup=False)
    if csv_path:
        with atomic_file.target(csv_path) as where:
            csvfile.write(reports, Path(where), [t["name"] for t in assignment.tests])
        console.print(f"wrote {csv_path}", markup=False)
    return 0 if all(r.score >= r.max_score for r in reports) else 1  # exit 1: some submission below full marks


@click.command("grade")
@click.option("--n", "n", type=options.POSITIVE, default=100, show_default=True, help="Submissions to grade.")
@JOBS
@options.JSON_REPORT
@options.QUIET
@click.pass_context
def bench_grade_command(ctx, n, jobs, json_path, quiet) -> None:
    """Time grading N generated submissions of assignment 2 (right, IO-wasteful, wrong, stubs)."""
    jobs = at_once(n, jobs)

    def cost(n) -> estimate.Estimate:
        return estimate.process() + replace(estimate.grading(n, jobs), held=0)  # memory: `at_once` checked it

    what = f"grading {count(n)} submissions of assignment {grading_bench.ASSIGNMENT}, {count(jobs)} at a time,"
    estimate.guard(ctx, cost, what, [], limit=estimate.BENCH_LIMIT_SECONDS, n=n)
    with progress_bar(quiet, n) as progress:
        report = grading_bench.bench_grade(n, jobs, progress=progress)
    if not emit_json(report, json_path):
        console.print(render.bench(report))


def apart(outputs: dict[str, str | None], master: Path, found: list[Path], submissions: Path) -> None:
    """InputError naming the first option whose file is the master, a submission being graded, or inside the
    submissions' folder (a file made there would be graded as a submission next run): checked before any grading."""
    inside = submissions.resolve() if submissions.is_dir() else None
    for flag, path in outputs.items():
        if not path:
            continue
        for other, what in ((master, "the master"), *((s, "a submission being graded") for s in found)):
            if _same(path, other):
                raise InputError(f"{flag}: {path} is {what} ({shown_name(other.name)}); write it elsewhere")
        if inside is not None and Path(path).resolve().is_relative_to(inside):
            raise InputError(f"{flag}: {path} is inside the submissions' folder {submissions}; write it elsewhere")


def _same(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing (a file yet to be written), or a link to nothing
        return False


def at_once(submissions: int, jobs: int | None) -> int:
    """How many submissions are graded at once: --jobs (the CPUs unless given), at most all of them; refused in one
    line naming --jobs if their processes would not fit in memory."""
    jobs = min(jobs or os.cpu_count() or 1, submissions)
    fits = max(1, (estimate.available_memory() - estimate.PROCESS) // estimate.GRADING_CHILD)
    est = estimate.process() + replace(estimate.grading(submissions, jobs), seconds=0.0)  # a class takes its time
    estimate.refuse(est, "--jobs", f"grading {count(jobs)} submissions at once", f"--jobs {fits} or less")
    return jobs


@contextmanager
def progress_bar(quiet: bool, submissions: int, each: bool = False):
    """A progress bar over the submissions (shown after ~2 s); yields the grader's `progress(report)`, which advances
    it and, with `each`, prints the submission's score."""
    with Work(quiet) as work, work.steps(f"grading {count(submissions)} submission{'s' * (submissions != 1)}",
                                         submissions) as advance:  # fmt: skip

        def progress(report) -> None:
            advance()
            if each:
                name = shown_name(report.submission)  # one line, whatever the file is called
                line = f"graded {name}: {report.score:g} / {report.max_score:g} ({seconds(report.seconds)})"
                work.print(console, line, highlight=False, markup=False)  # a file's name is text

        yield progress


COMMANDS = (assignments, grade_command)  # `flashsim` registers these (sim/cli); `bench grade` joins `flashsim bench`
