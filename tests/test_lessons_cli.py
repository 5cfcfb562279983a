"""`flashsim lessons`: where the lessons are, and a copy of them for a student whose flashsim came from a wheel."""

import json
from pathlib import Path

from click.testing import CliRunner

from sim.cli import app
from sim.lab import course

LESSONS = Path(__file__).resolve().parent.parent / "lessons"


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_course_is_the_checkouts_lessons_folder():
    assert course.root() == LESSONS
    assert course.assignments() == LESSONS / "assignments"
    assert course.lessons() == sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))


def test_list_names_every_lesson_with_its_first_heading():
    result = invoke("lessons", "list")
    assert result.exit_code == 0, result.output
    for notebook in sorted(LESSONS.glob("[0-9][0-9]_*.ipynb")):
        heading = "".join(json.loads(notebook.read_text())["cells"][0]["source"]).splitlines()[0]
        assert notebook.name in result.output
        assert heading.lstrip("# ") in result.output


def test_copy_writes_each_lesson_byte_for_byte_and_keeps_what_is_there(tmp_path):
    mine = tmp_path / "course" / "01_memory_wall.ipynb"
    mine.parent.mkdir()
    mine.write_text("my notes")
    result = invoke("lessons", "copy", tmp_path / "course")
    assert result.exit_code == 0, result.output
    notebooks = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
    assert f"copied {len(notebooks) - 1} lessons" in result.output and "kept 1 already there" in result.output
    assert mine.read_text() == "my notes"
    for notebook in notebooks[1:]:
        assert (tmp_path / "course" / notebook.name).read_bytes() == notebook.read_bytes()
    hints = sorted((LESSONS / "hints").glob("*.toml"))
    assert hints, "the course's hint files"
    for hint in hints:  # a notebook opened from the copy finds its hints beside it
        assert (tmp_path / "course" / "hints" / hint.name).read_bytes() == hint.read_bytes()


def test_copy_into_a_place_that_cannot_be_made_is_one_line_and_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = invoke("lessons", "copy", blocker / "inside")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and result.output.startswith("error: folder: cannot make")
