"""The grader as an instructor and a student use it: export, self-check, grade a folder, CSV and Gradescope JSON."""

import csv
import json
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from sim.cli import app
from sim.grading import grader, gradescope, report, spec
from tests.cli_runner import error_line

HERE = Path(__file__).parent
SUBMISSIONS = HERE / "grading_submissions" / "02"


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def check_gradescope(results: dict) -> None:
    """The fields of Gradescope's autograder specification (results.json) that flashsim writes, with their types."""
    assert set(results) <= {
        "score",
        "execution_time",
        "output",
        "tests",
        "leaderboard",
        "visibility",
        "stdout_visibility",
    }
    assert isinstance(results["score"], int | float) and isinstance(results["execution_time"], int | float)
    assert isinstance(results["output"], str) and isinstance(results["tests"], list) and results["tests"]
    for t in results["tests"]:
        assert set(t) == {"name", "score", "max_score", "status", "output", "visibility"}
        assert isinstance(t["name"], str) and isinstance(t["output"], str)
        assert (
            isinstance(t["score"], int | float)
            and isinstance(t["max_score"], int | float)
            and 0 <= t["score"] <= t["max_score"]
        )
        assert t["status"] in ("passed", "failed")
        assert t["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    for entry in results.get("leaderboard", []):
        assert set(entry) <= {"name", "value", "order"} and isinstance(entry["name"], str)
        assert isinstance(entry["value"], int | float | str) and entry.get("order", "desc") in ("asc", "desc")
    assert abs(results["score"] - sum(t["score"] for t in results["tests"])) < 1e-6


def test_instructor_exports_grades_a_folder_and_gets_a_csv_and_gradescope_json(tmp_path):
    student, instructor, folder = tmp_path / "student", tmp_path / "instructor", tmp_path / "submissions"
    out = invoke("assignments", "export", "02", "--student", student)
    assert out.exit_code == 0 and "wrote" in out.output
    assert invoke("assignments", "export", "02", "--instructor", instructor).exit_code == 0
    folder.mkdir()
    shutil.copy(spec.locate("02"), folder / "alice.py")
    shutil.copy(SUBMISSIONS / "fa2_loop_order.py", folder / "bob.py")
    shutil.copy(student / "02_flash1_forward.py", folder / "carol.py")
    out = invoke("grade", instructor / "02_flash1_forward.py", folder, "--seed", 4, "--csv", tmp_path / "grades.csv")
    assert out.exit_code == 1, out.output  # bob and carol below full marks
    assert "graded alice.py: 100 / 100" in out.output and "graded carol.py: 0 / 100" in out.output
    rows = list(csv.DictReader(open(tmp_path / "grades.csv")))
    assert [(r["submission"], r["score"]) for r in rows] == [("alice.py", "100"), ("bob.py", "70"), ("carol.py", "0")]
    assert (
        rows[1]["IO against Algorithm 1"] == "0"
        and rows[0]["IO against Algorithm 1"] == "15"
        and rows[0]["seed"] == "4"
    )
    assert int(rows[0]["hbm_bytes"]) > 0 and rows[2]["hbm_bytes"] == ""

    out = invoke("grade", "02", folder / "bob.py", "--seed", 4, "--gradescope", tmp_path / "results.json")
    assert out.exit_code == 1, out.output  # 70 / 100
    results = json.loads((tmp_path / "results.json").read_text())
    check_gradescope(results)
    assert results["score"] == 70
    io = next(t for t in results["tests"] if t["name"] == "IO against Algorithm 1")
    assert io["status"] == "failed" and "K and V were read" in io["output"] and io["visibility"] == "visible"
    assert {t["visibility"] for t in results["tests"] if t["name"] == "IO, N ≠ Nk"} == {"hidden"}
    assert results["leaderboard"][0]["name"] == "HBM bytes" and results["leaderboard"][0]["order"] == "asc"


def test_the_leaderboard_counts_the_public_tests_bytes_alone():
    """Red team 109: a submission padded its bytes by loads of its own so that the sum over the IO tests, hidden ones
    included, spelled a hidden case's N and Nk on the leaderboard every student sees."""
    tests = [report.TestResult("IO public", "public", 15, 15, "passed", "", "", hbm_bytes=1_000),
             report.TestResult("IO hidden", "hidden", 10, 10, "passed", "", "", hbm_bytes=276_314),
             report.TestResult("output", "public", 10, 10, "passed", "", "")]  # fmt: skip
    graded = report.SubmissionReport("a.py", "02", 4, tests=tests)
    results = gradescope.results(graded)
    check_gradescope(results)
    assert results["leaderboard"] == [{"name": "HBM bytes", "value": 1_000, "order": "asc"}]
    assert graded.hbm_bytes == 277_314  # the instructor's CSV keeps the sum


def test_a_flag_s_words_from_the_submission_reach_only_the_instructor_on_gradescope(tmp_path):
    leak = HERE / "hostile_submissions" / "gradescope" / "leaks_hidden_case.py"
    out = invoke("grade", "02", leak, "--seed", 4, "--gradescope", tmp_path / "results.json")
    assert out.exit_code == 1, out.output
    results = json.loads((tmp_path / "results.json").read_text())
    check_gradescope(results)
    assert results["score"] == 0 and "LEAK" not in results["output"]
    assert results["output"].startswith("scored 0: the submission tried to read other submissions\nseed 4")
    (review,) = (t for t in results["tests"] if t["name"] == "flags, for review")
    assert review["visibility"] == "hidden" and review["output"].startswith(
        "tried to read other submissions: LEAK sram="
    )
    shown = [t["output"] for t in results["tests"] if t["visibility"] == "visible"]
    assert len(shown) == 3 and not any("LEAK" in s for s in shown)


def test_self_check_runs_the_public_tests_and_never_names_a_hidden_one(tmp_path):
    invoke("assignments", "export", "02", "--student", tmp_path)
    out = invoke("grade", "--self-check", tmp_path / "02_flash1_forward.py", "--seed", 1)
    assert out.exit_code == 1, out.output  # 0 / 40
    assert "0 / 40" in out.output and "not implemented yet" in out.output and "hidden tests" in out.output
    full = spec.load(spec.locate("02"))
    for t in full.tests:
        assert (t["name"][:12] in out.output) == (t["visibility"] == "public"), t["name"]
    mine = tmp_path / "mine.py"
    shutil.copy(spec.locate("02"), mine)
    out = invoke("grade", "--self-check", tmp_path / "02_flash1_forward.py", mine, "--seed", 1)
    assert out.exit_code == 0 and "40 / 40" in out.output


def test_bad_input_gets_one_line():
    out = invoke("grade", "99", SUBMISSIONS / "hangs.py")
    assert out.exit_code == 2 and out.output.startswith("error: assignment: no file or assignment named '99'")
    out = invoke("grade", "02")
    assert out.exit_code == 2 and "grade: give ASSIGNMENT and SUBMISSION" in out.output
    out = invoke("grade", "02", SUBMISSIONS, "--gradescope", "x.json")
    assert out.exit_code == 2 and "--gradescope: grades one submission" in out.output
    out = invoke("grade", "02", SUBMISSIONS / "missing.py")
    assert out.exit_code == 2 and "submission: no file or folder" in out.output
    out = invoke("assignments", "export", "02")
    assert out.exit_code == 2 and "exactly one of --student DIR or --instructor DIR" in out.output


TINY = Path(__file__).parent / "grading_submissions" / "tiny" / "01_tiny_softmax.py"


def no_grading(monkeypatch):
    """Make any grading fail the test: a refusal must come before the work."""

    def grade(*_, **__):
        raise AssertionError("the command graded what it should have refused")

    monkeypatch.setattr(grader, "grade", grade)


@pytest.mark.parametrize(
    "args,option",
    [
        (("--seed", -1), "--seed"),
        (("--seed", "x"), "--seed"),
        (("--timeout", "nan"), "--timeout"),
        (("--timeout", "inf"), "--timeout"),
        (("--timeout", "1e308"), "--timeout"),
        (("--timeout", 0), "--timeout"),
        (("--jobs", 0), "--jobs"),
        (("--jobs", 2**64), "--jobs"),
        (("--hidden-visibility", "secret"), "--hidden-visibility"),
        (("--csv", "{tmp}/missing/grades.csv"), "--csv"),
        (("--csv", "{tmp}"), "--csv"),
        (("--csv", ""), "--csv"),
        (("--gradescope", "{tmp}/missing/results.json"), "--gradescope"),
        (("--gradescope", "{tmp}"), "--gradescope"),
    ],
)
def test_every_bad_option_of_grade_is_refused_in_one_line_before_grading(args, option, tmp_path, monkeypatch):
    no_grading(monkeypatch)
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in args]
    line = error_line(invoke("grade", TINY, TINY, *args))
    assert re.search(rf"{option}\b", line), line
    assert not (tmp_path / "missing").exists()  # no folder the user did not ask for


@pytest.mark.parametrize("command", [("grade", TINY, TINY, "--csv"), ("grade", TINY, TINY, "--gradescope"),
                                     ("grade", TINY, TINY, "--journal"), ("trace", "--svg"), ("bench", "gpu", "--markdown")])  # fmt: skip
def test_a_dash_for_a_file_only_json_writes_to_stdout_is_refused(command, tmp_path, monkeypatch):
    # red team 84: "-" passed as stdout, but nothing wrote there: --csv - made a file named "-" in the current
    # folder (then --gradescope - replaced it, and --journal - refused to resume it)
    no_grading(monkeypatch)
    monkeypatch.chdir(tmp_path)
    line = error_line(invoke(*command, "-"))
    assert line.endswith(
        f"Invalid value for '{command[-1]}': '-' is not stdout here: name a file (./- for one called '-')"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "option, target, what",
    [
        ("--csv", "master.py", "is the master (master.py)"),
        ("--csv", "link.csv", "is the master (master.py)"),  # a link to it
        ("--gradescope", "class/alice.py", "is a submission being graded (alice.py)"),
        ("--journal", "class/alice.py", "is a submission being graded (alice.py)"),
        ("--csv", "class/grades.csv", "is inside the submissions' folder"),
        ("--gradescope", "class/sub/results.json", "is inside the submissions' folder"),
    ],
)
def test_an_output_over_the_master_or_a_submission_is_refused_before_grading(tmp_path, monkeypatch, option, target,
                                                                             what):  # fmt: skip
    # before: --csv MASTER graded the class, then wrote the grades over the master (red team H3)
    no_grading(monkeypatch)
    (tmp_path / "class" / "sub").mkdir(parents=True)
    shutil.copy(TINY, tmp_path / "master.py")
    shutil.copy(TINY, tmp_path / "class" / "alice.py")
    (tmp_path / "link.csv").symlink_to(tmp_path / "master.py")
    line = error_line(invoke("grade", tmp_path / "master.py", tmp_path / "class", option, tmp_path / target))
    assert line.startswith(f"error: {option}: {tmp_path / target} {what}"), line
    assert (tmp_path / "master.py").read_bytes() == (tmp_path / "class" / "alice.py").read_bytes() == TINY.read_bytes()
    assert sorted(p.name for p in (tmp_path / "class").rglob("*")) == ["alice.py", "sub"]


def test_grade_refuses_more_jobs_at_once_than_memory_holds(tmp_path, monkeypatch):
    from sim.cli import estimate

    no_grading(monkeypatch)
    for i in range(40):
        shutil.copy(TINY, tmp_path / f"s{i:02d}.py")
    monkeypatch.setattr(estimate, "available_memory", lambda: 1 << 30)
    line = error_line(invoke("grade", TINY, tmp_path, "--jobs", 40))
    assert line.startswith("error: --jobs: ") and "memory" in line and "try --jobs" in line


@pytest.mark.parametrize(
    "args,option",
    [
        (("--student", "{tmp}/missing/handout"), "--student"),
        (("--instructor", "{tmp}/missing/master"), "--instructor"),
        (("--student", "{tmp}/a_file"), "--student"),
        (("--student", ""), "--student"),
        (("--student", "{tmp}/s", "--instructor", "{tmp}/i"), "--student"),
    ],
)
def test_assignments_export_refuses_missing_parents_and_files_in_one_line(args, option, tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in args]
    line = error_line(invoke("assignments", "export", TINY, *args))
    assert option in line, line
    assert not (tmp_path / "missing").exists() and not (tmp_path / "s").exists()


def test_assignments_export_makes_the_one_folder_it_is_given(tmp_path):
    out = invoke("assignments", "export", TINY, "--student", tmp_path / "handout")
    assert out.exit_code == 0, out.output
    student = (tmp_path / "handout" / TINY.name).read_text()
    assert "raise NotImplementedError" in student and "masked logits" not in student and "np.maximum" not in student


def test_bench_grade_refuses_a_class_that_would_take_hours_before_grading(monkeypatch):
    from sim.grading import bench as grading_bench

    def bench_grade(*_, **__):
        raise AssertionError("bench grade started the work it should have refused")

    monkeypatch.setattr(grading_bench, "bench_grade", bench_grade)
    no_grading(monkeypatch)
    line = error_line(invoke("bench", "grade", "--n", 10**12))
    assert line.startswith("error: --n: ") and "about" in line and "try --n" in line and "or less" in line
    for args, option in (
        (("--n", 0), "--n"),
        (("--jobs", -1), "--jobs"),
        (("--json", "/nonexistent/dir/bench.json"), "--json"),
    ):
        assert option in error_line(invoke("bench", "grade", *args))


class Bars:
    """Stands in for sim.cli.progress.Work: records each bar's description, total and how far it got."""

    made: ClassVar[list] = []

    def __init__(self, quiet=False, console=None):
        self.quiet = quiet

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def print(self, console, *objects, **kwargs):
        console.print(*objects, **kwargs)

    @contextmanager
    def steps(self, description, total):
        bar = {"description": description, "total": total, "done": 0, "quiet": self.quiet}
        Bars.made.append(bar)

        def advance(units=1):
            bar["done"] += units

        yield advance


def test_grading_a_folder_advances_a_progress_bar_one_submission_at_a_time(tmp_path, monkeypatch):
    from sim.cli import grading

    monkeypatch.setattr(grading, "Work", Bars)
    monkeypatch.setattr(Bars, "made", [])
    for name in ("a.py", "b.py", "c.py"):
        shutil.copy(TINY, tmp_path / name)
    out = invoke("grade", TINY, tmp_path, "--seed", 2)
    assert out.exit_code == 0, out.output
    assert out.output.count("2 / 2") >= 3
    out = invoke("grade", TINY, tmp_path / "a.py", "--quiet")
    assert out.exit_code == 0, out.output
    assert Bars.made == [
        {"description": "grading 3 submissions", "total": 3, "done": 3, "quiet": False},
        {"description": "grading 1 submission", "total": 1, "done": 1, "quiet": True},
    ]


def test_bench_grade_grades_the_master_and_writes_its_report(tmp_path, monkeypatch):
    from sim.cli import grading

    monkeypatch.setattr(grading, "Work", Bars)
    monkeypatch.setattr(Bars, "made", [])
    out = invoke("bench", "grade", "--n", 2, "--jobs", 2, "--json", tmp_path / "bench.json")
    assert out.exit_code == 0, out.output
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["submissions"] == 2 and report["jobs"] == 2 and report["assignment"] == "02_flash1_forward"
    assert report["kinds"] == {"right": {"count": 2, "scores": [100.0]}}  # the first two of every ten are the master
    assert report["isolation"].startswith("isolation: ") and report["confinement_ms"]["children"] == 2
    assert 0 < report["confinement_ms"]["median"] <= report["confinement_ms"]["max"]
    assert Bars.made == [{"description": "grading 2 submissions", "total": 2, "done": 2, "quiet": False}]


def test_a_submissions_line_goes_above_a_drawn_bar_and_to_stdout_otherwise(monkeypatch):
    """A line printed on another console while the bar is live would run into the bar's own line."""
    import io
    import sys

    from rich.console import Console

    from sim.cli.progress import Work

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    bar_out, out = io.StringIO(), io.StringIO()
    plain = Console(file=out, width=100)
    with Work(False, Console(file=bar_out, width=100, force_terminal=True, color_system=None)) as work:
        with work.steps("grading 2 submissions", 2) as advance:
            work.print(plain, "graded a.py: 2 / 2")
            advance()
            work.draw()
            work.print(plain, "graded b.py: 2 / 2")
    assert out.getvalue() == "graded a.py: 2 / 2\n"
    assert "graded b.py: 2 / 2" in bar_out.getvalue() and "grading 2 submissions" in bar_out.getvalue()


def test_a_folder_whose_submission_raises_markup_and_is_named_with_it_is_graded_and_its_csv_written(tmp_path):
    """What a submission says (its exception) and its file's name (an LMS keeps the name a student uploaded) are
    text: rich markup in them is printed as written, never parsed — `[/]` once stopped the whole batch with a
    traceback before the summary and the CSV."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copy(TINY, folder / "alice.py")
    said = "[/] [link=https://example.com]see[/link] [bold]"
    (folder / "[bold]bob[red].py").write_text(f"def update(m, ℓ, x):\n    raise ValueError({said!r})\n")
    out = invoke("grade", TINY, folder, "--seed", 2, "--csv", tmp_path / "grades.csv")
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    assert out.exit_code == 1, out.output  # bob scores 0
    flat = " ".join(out.output.split())
    assert "graded [bold]bob[red].py: 0 / 2" in flat and "[bold]bob[red].py" in flat.split("2 submissions")[1]
    assert "raised ValueError: [/]" in flat and "[link=https://example.com]see[/link]" in flat  # a cell folds
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    assert [(r["submission"], r["score"]) for r in rows] == [("[bold]bob[red].py", "0"), ("alice.py", "2")]


def test_what_a_submission_says_reaches_the_terminal_csv_json_and_journal_as_printable_text(tmp_path):
    """A submission's exception is the child's text: a lone surrogate in it once stopped the grader with a
    UnicodeEncodeError (no summary, no CSV, no results.json), and terminal escapes in it reached the instructor's
    terminal (a cursor moved up over a classmate's line, a right-to-left override). Every control or unprintable
    character arrives written out as its escape."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copy(TINY, folder / "alice.py")
    said = "\ud800 \x1b[1A\x1b[2Kgraded alice.py: 0 / 2 \u202e"
    (folder / "bob.py").write_text(f"def update(m, ℓ, x):\n    raise ValueError({said!r})\n".replace("\\u", "\\\\u"))
    assert "\\ud800" in (folder / "bob.py").read_text()  # the file holds the escapes; Python makes the characters
    written = r"\ud800 \x1b[1A\x1b[2Kgraded alice.py: 0 / 2 \u202e"
    args = ["grade", TINY, folder, "--seed", 2, "--details", "--csv", tmp_path / "grades.csv",
            "--journal", tmp_path / "journal.jsonl"]  # fmt: skip
    out = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300"})  # each cell on one line
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    assert out.exit_code == 1, out.output
    assert "\x1b" not in out.output and "\u202e" not in out.output and written in out.output
    rows = list(csv.DictReader((tmp_path / "grades.csv").open(encoding="utf-8")))
    assert [(r["submission"], r["score"]) for r in rows] == [("alice.py", "2"), ("bob.py", "0")]
    lines = (tmp_path / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    bob = [json.loads(line) for line in lines[1:] if json.loads(line)["submission"] == "bob.py"]
    assert len(lines) == 3 and all(written in t["feedback"] for t in bob[0]["tests"])
    out = invoke("grade", TINY, folder / "bob.py", "--seed", 2, "--gradescope", tmp_path / "results.json")
    assert out.exit_code == 1, out.output
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert all(written in t["output"] for t in results["tests"])


def test_a_tests_case_wraps_between_its_parts_at_80_columns():
    master = spec.locate("02")

    def report(columns: str) -> str:
        out = CliRunner().invoke(app, ["grade", "02", str(master), "--seed", "1"], env={"COLUMNS": columns})
        assert out.exit_code == 0, out.output
        return out.stdout

    cases = re.findall(r"\[(N=[^\]]*)\]", report("300"))  # each case on one line
    parts = {p for case in cases for p in re.split(r", (?![^(]*\))", case)}
    assert "SRAM 10,240 B" in parts and len(cases) == 8, cases
    narrow = report("80")
    lines = [line.split("│")[-1].strip(" [],") for line in narrow.splitlines()]  # the feedback column's text
    pieces = {p for line in lines for p in re.split(r", (?![^(]*\))", line)}
    assert parts <= pieces, sorted(parts - pieces)  # before: "SRAM 10,240" and "B" on two lines
    assert max(len(line) for line in narrow.splitlines() if "│" in line) <= 80


def test_grading_with_a_student_copy_as_the_master_says_only_its_public_tests_are_graded(tmp_path):
    """A handout given where the master goes grades the public tests only: the report says so (it said nothing)."""
    assert invoke("assignments", "export", "02", "--student", tmp_path / "student").exit_code == 0
    handout = tmp_path / "student" / "02_flash1_forward.py"
    public = sum(t["visibility"] == "public" for t in spec.load(spec.locate("02")).tests)
    out = invoke("grade", handout, spec.locate("02"), "--seed", 1)
    assert (f"note: 02_flash1_forward.py holds no hidden test (a student's copy rather than the master?): only its "
            f"{public} public tests are graded") in " ".join(out.output.split()), out.output  # fmt: skip
    out = invoke("grade", spec.locate("02"), spec.locate("02"), "--seed", 1)
    assert out.exit_code == 0 and "holds no hidden test" not in out.output
