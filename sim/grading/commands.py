"""The grader's commands: `flashsim assignments list|export`, `flashsim grade`, `flashsim bench grade`."""

import os
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from sim import bench
from sim.errors import InputError
from sim.format import seconds
from sim.grading import csvfile, export, grader, gradescope, render, sandbox, spec

console = Console(highlight=False)  # not sim.cli.options.console: sim.cli imports this module to register it


@click.group("assignments")
def assignments() -> None:
    """The graded assignments: list them, export the student's or the instructor's copy."""


@assignments.command("list")
def list_command() -> None:
    """The assignments in lessons/assignments, with their tests and points."""
    table = Table(show_edge=False)
    for name in ("assignment", "title", "public tests", "hidden tests", "points"):
        table.add_column(name)
    for path in spec.masters():
        a = spec.load(path)
        public = sum(t["visibility"] == "public" for t in a.tests)
        table.add_row(a.name, a.title, str(public), str(len(a.tests) - public), f"{a.points:g}")
    console.print(table)


@assignments.command("export")
@click.argument("assignment")
@click.option("--student", type=click.Path(file_okay=False), default=None, help="Write the student's copy here.")
@click.option("--instructor", type=click.Path(file_okay=False), default=None,
              help="Write the master here, with a Gradescope autograder folder beside it.")  # fmt: skip
def export_command(assignment, student, instructor) -> None:
    """Export ASSIGNMENT (a name such as 02, or a master's path) for students or for the instructor."""
    master = spec.locate(assignment)
    spec.load(master)
    path = export.export(master, student=student and Path(student), instructor=instructor and Path(instructor))
    what = "student's copy (stubs, public tests)" if student else "master, and autograder/ for Gradescope"
    console.print(f"wrote {path}: the {what}")


@click.command("grade")
@click.argument("paths", nargs=-1, required=True)
@click.option("--self-check", is_flag=True, help="Public tests only (a student's own check); one PATH may be given.")
@click.option("--seed", type=int, default=None, help="Seed of this run's cases  [default: a fresh one, printed]")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Submissions graded at once  [default: CPUs]")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds of wall clock per test.")  # fmt: skip
@click.option("--gradescope", "gradescope_path", type=click.Path(dir_okay=False), default=None,
              help="Write Gradescope's results.json here (one submission).")  # fmt: skip
@click.option("--hidden-visibility", type=click.Choice(gradescope.VISIBILITY), default="hidden", show_default=True,
              help="Gradescope visibility of the hidden tests.")  # fmt: skip
@click.option(
    "--csv", "csv_path", type=click.Path(dir_okay=False), default=None, help="Write one row per submission here."
)
@click.option("--details", is_flag=True, help="For a folder: every submission's table, not only the summary.")
def grade_command(
    paths, self_check, seed, jobs, timeout, gradescope_path, hidden_visibility, csv_path, details
) -> None:
    """Grade SUBMISSION (a .py file, or a folder of them) against ASSIGNMENT (a name such as 02, or a master's path).

    flashsim grade ASSIGNMENT SUBMISSION; flashsim grade --self-check FILE (a student's copy, public tests).
    """
    if len(paths) == 1 and self_check:
        paths = (paths[0], paths[0])
    if len(paths) != 2:
        raise InputError("grade: give ASSIGNMENT and SUBMISSION (or --self-check FILE)")
    assignment = spec.load(spec.locate(paths[0]))
    found = grader.submissions_in(Path(paths[1]))
    if gradescope_path and len(found) > 1:
        named = [p for p in found if p.name == assignment.path.name]
        if len(named) != 1:
            raise InputError(f"--gradescope: grades one submission; {paths[1]} holds {len(found)} .py files")
        found = named
    many = len(found) > 1

    def progress(report) -> None:
        if many:
            console.print(
                f"graded {report.submission}: {report.score:g} / {report.max_score:g} ({seconds(report.seconds)})"
            )

    limits = sandbox.Limits(wall_s=timeout)
    reports = grader.grade(
        assignment, found, seed=seed, jobs=jobs, limits=limits, self_check=self_check, progress=progress
    )
    for r in reports if (details or not many) else []:
        console.print(render.submission(r, self_check))
    if many:
        console.print(render.summary(reports))
    if gradescope_path:
        gradescope.write(reports[0], Path(gradescope_path), hidden_visibility)
        console.print(f"wrote {gradescope_path}")
    if csv_path:
        csvfile.write(reports, Path(csv_path))
        console.print(f"wrote {csv_path}")


@click.command("grade")
@click.option("--n", "n", type=click.IntRange(min=1), default=100, show_default=True, help="Submissions to grade.")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Submissions graded at once  [default: CPUs]")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write the report here.")  # fmt: skip
def bench_grade_command(n, jobs, json_path) -> None:
    """Time grading N generated submissions of assignment 2 (right, IO-wasteful, wrong, stubs)."""
    from sim.grading import bench as grading_bench

    report = grading_bench.bench_grade(n, jobs or os.cpu_count())
    console.print(render.bench(report))
    if json_path:
        bench.write_json(report, json_path)


COMMANDS = (assignments, grade_command)  # `flashsim` registers these (sim/cli); `bench grade` joins `flashsim bench`
