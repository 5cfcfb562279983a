"""Hostile submissions aimed at the grader's reports (tests/hostile_submissions/reports), graded in one batch beside
an honest classmate and two copies of it whose names are spreadsheet formulas: a flood of violations is stopped
early and leaves short flags, no CSV cell starts a formula, no text of a submission forges a report's line, a file
too small to compare says so, and every audited probe of a denied folder is flagged and scored 0."""

import csv
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from sim.grading import csvfile, grader, render, sandbox, spec
from sim.grading.report import SubmissionReport

HERE = Path(__file__).parent
REPORTS = HERE / "hostile_submissions" / "reports"
CLASSMATE = HERE / "grading_submissions" / "02" / "algorithm1.py"
MASTER = spec.locate("02")
SOLUTIONS = "tried to read the instructor solutions"
REACH = "raised PermissionError: flashsim grade: a submission may not reach "
FORMULAS = ("=2+5.py", "@SUM(A1).py", "-2+3.py")  # copies of the classmate, named to be read as formulas


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Every submission of REPORTS, the classmate and its copies, graded two at a time; the reports by file stem,
    the CSV's rows and its size, the journal's size, each submission's rendered table."""
    base = tmp_path_factory.mktemp("reports")
    (base / "class").mkdir()
    for name in FORMULAS:
        shutil.copyfile(CLASSMATE, base / "class" / name)
    assignment = replace(spec.load(MASTER), tests=spec.load(MASTER).tests[:2])
    paths = [*sorted(REPORTS.glob("*.py")), CLASSMATE, *sorted((base / "class").glob("*.py"))]
    reports = grader.grade(assignment, paths, seed=5, jobs=2, limits=sandbox.Limits(wall_s=2.0),
                           record=base / "journal.jsonl")  # fmt: skip
    csvfile.write(reports, base / "grades.csv", [t["name"] for t in assignment.tests])
    csv.field_size_limit(1 << 30)  # a flood once made a 42 MB cell: let the tests below say so
    shown = {}
    for r in reports:
        console = Console(width=300, record=True, file=open("/dev/null", "w"))
        console.print(render.submission(r))
        shown[Path(r.submission).stem] = console.export_text()
    return {
        "reports": {Path(r.submission).stem: r for r in reports},
        "csv": {r["submission"]: r for r in csv.DictReader(open(base / "grades.csv", encoding="utf-8"))},
        "sizes": {"csv": (base / "grades.csv").stat().st_size, "journal": (base / "journal.jsonl").stat().st_size},
        "shown": shown,
    }


def test_a_flood_of_forged_violations_is_refused_at_its_first_frame(batch):
    report = batch["reports"]["floods_forged_violations"]
    assert report.tests[0].feedback.startswith("malformed message: violation's what is 'AAAA")
    assert report.flags == [] and report.score == 0 and report.seconds < 10  # 34 s before


@pytest.mark.parametrize("name", ["floods_violation_details", "opens_many_denied_paths"])
def test_a_flood_of_violations_is_stopped_after_twenty_and_leaves_five_flags_and_a_count(batch, name):
    report = batch["reports"][name]
    assert report.tests[0].feedback == "stopped: its process reported more than 20 refused reads of the solutions"
    assert report.tests[1].feedback.startswith(f"not run: the submission {SOLUTIONS}")
    assert len(report.flags) == 6 and report.flags[-1] == "… and 15 more"
    assert all(f.startswith(f"{SOLUTIONS}: /") and len(f) < 260 for f in report.flags[:5])
    assert len(set(report.flags)) == 6 and report.score == 0 and report.seconds < 10


def test_the_floods_leave_a_small_csv_and_journal(batch):
    assert batch["sizes"]["csv"] < 20_000 and batch["sizes"]["journal"] < 60_000  # 42 MB each before
    assert max(len(row["flags"]) for row in batch["csv"].values()) < 2000


def test_no_csv_cell_starts_a_formula(batch):
    rows = batch["csv"]
    assert rows["forges_formula_violation.py"]["flags"] == ""
    assert (
        batch["reports"]["forges_formula_violation"]
        .tests[0]
        .feedback.startswith("malformed message: violation's what is '=HYPERLINK(")
    )
    for name in FORMULAS:  # the classmate's work, under a name a spreadsheet would run
        assert rows["'" + name]["score"] == "25"
    cells = [c for row in rows.values() for c in row.values()]
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not c[1:].isdigit())]


def test_new_lines_in_an_exception_forge_no_line_of_the_report(batch):
    report = batch["reports"]["forges_report_lines"]
    feedback = report.tests[0].feedback
    assert feedback.startswith("raised OK  carol.py · 02_flash1_forward · 0 / 25 · scored 0: the submission tried")
    assert feedback.endswith("solutions: first (line 11, in x forged line from the submission)")
    lines = batch["shown"]["forges_report_lines"].splitlines()
    assert not [line for line in lines if line.lstrip().startswith(("carol.py", "forged line"))]
    assert report.flags == [] and report.score == 0


def test_a_master_run_by_exec_scores_but_is_named_for_review_and_not_judged(batch):
    report = batch["reports"]["exec_wrapped_master"]
    assert report.score == 25 and report.flags == []  # the score stands: a person decides
    assert "similarity not judged: too little code to compare (fewer than 100 runs of its own)" in report.notes
    assert "for review: may run code built at run time (import base64, line 2; exec, line 3)" in report.notes
    honest = batch["reports"]["algorithm1"]
    assert honest.score == 25 and not [n for n in honest.notes if "not judged" in n or "builds" in n]


@pytest.mark.parametrize(
    ("name", "event"),
    [("lists_lessons", "os.listdir"), ("scans_lessons", "os.scandir"), ("globs_lessons", "glob.glob"),
     ("chdirs_to_lessons", "os.chdir")],
)  # fmt: skip
def test_each_audited_probe_of_a_denied_folder_is_flagged_and_scored_zero(batch, name, event):
    report = batch["reports"][name]
    assert report.tests[0].feedback.startswith(f"{REACH}({event}) ")
    assert f"/lessons ({SOLUTIONS}) (line " in report.tests[0].feedback or "/lessons/" in report.tests[0].feedback
    assert [f.split(":")[0] for f in report.flags] == [SOLUTIONS] and report.score == 0


def test_probes_of_the_masters_and_classmates_folders_before_honest_work_score_zero(batch):
    report = batch["reports"]["probes_then_works"]
    # its work is honest, but its os.stat probes are refused reads too: with the listings, more than the flood allows
    assert report.tests[0].feedback == "stopped: its process reported more than 20 refused reads of the solutions"
    assert report.tests[1].feedback.startswith(f"not run: the submission {SOLUTIONS}")
    guards = {SOLUTIONS, "tried to read other submissions", "imported the library's solution"}
    assert {f.split(":")[0] for f in report.flags[:5]} <= guards and report.flags[5].startswith("… and ")
    assert report.score == 0
    assert batch["csv"]["probes_then_works.py"]["score"] == "0"


@given(st.text(alphabet=", ()=a1", max_size=40))
def test_a_case_s_parts_are_the_regex_s_without_its_rescans(text):
    """render.parts splits as the regex it replaced did (", " not followed by a ")" before any "("), in one pass."""
    assert render.parts(text) == re.split(r", (?![^(]*\))", text)


def test_a_summary_row_cuts_its_notes_between_words_and_counts_what_it_left_out():
    """Red team 96: a row's notes ended "follow lines 1–", cut at 160 characters mid-word, unmarked."""
    words = [f"word{k:03d}" for k in range(60)]  # 8 characters each, 479 with their spaces
    notes = [" ".join(words), "second note", "third note", "fourth note"]
    row = render.summary([SubmissionReport("a.py", "02", 1, notes=notes)]).columns[3]._cells[0].plain
    kept = row.removesuffix("… (+2 more)").split(" ")
    assert row.endswith("… (+2 more)") and len(row) <= render.NOTES
    assert kept == words[: len(kept)] and len(kept) == (render.NOTES - len("… (+2 more)")) // 8  # whole words only
    short = render.summary([SubmissionReport("a.py", "02", 1, notes=["one", "two"])]).columns[3]._cells[0].plain
    assert short == "one; two"
