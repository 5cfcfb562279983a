"""The grader as an instructor and a student use it: export, self-check, grade a folder, CSV and Gradescope JSON."""

import csv
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from sim.cli import app
from sim.grading import spec

SUBMISSIONS = Path(__file__).parent / "grading_submissions" / "02"


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
    assert out.exit_code == 0, out.output
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
    assert out.exit_code == 0, out.output
    results = json.loads((tmp_path / "results.json").read_text())
    check_gradescope(results)
    assert results["score"] == 70
    io = next(t for t in results["tests"] if t["name"] == "IO against Algorithm 1")
    assert io["status"] == "failed" and "K and V were read" in io["output"] and io["visibility"] == "visible"
    assert {t["visibility"] for t in results["tests"] if t["name"] == "IO, N ≠ Nk"} == {"hidden"}
    assert results["leaderboard"][0]["name"] == "HBM bytes" and results["leaderboard"][0]["order"] == "asc"


def test_self_check_runs_the_public_tests_and_never_names_a_hidden_one(tmp_path):
    invoke("assignments", "export", "02", "--student", tmp_path)
    out = invoke("grade", "--self-check", tmp_path / "02_flash1_forward.py", "--seed", 1)
    assert out.exit_code == 0, out.output
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
