"""The course: every lesson runs top to bottom, unsolved and solved, with its checks saying what they should.

Unsolved (as committed), every exercise check says "not yet" and nothing crashes; with the reference
solutions from `lessons/solutions/` put in, every check says ✓. Both runs print nothing on stderr (no
warnings), and every figure has both axes labelled with a unit. Committed notebooks carry no outputs.
"""

import re

import pytest

nbformat = pytest.importorskip("nbformat", reason="the lessons' tests need the dev extra (nbformat, nbclient)")
pytest.importorskip("nbclient", reason="the lessons' tests need the dev extra (nbformat, nbclient)")
from notebook_runner import CHECK_LINE, UNLABELLED, execute, exercise_name, lessons, outputs, solutions

LESSONS = lessons()


def test_the_course_numbers_its_lessons_01_to_13_without_a_gap():
    assert [int(p.name[:2]) for p in LESSONS] == list(range(1, 14))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_committed_without_outputs(lesson):
    nb = nbformat.read(lesson, as_version=4)
    carrying = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not carrying, f"{lesson.name}: cells {carrying} carry outputs; run `nbstripout {lesson}`"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_says_the_answers_are_in_a_checkout_as_hint_does(lesson):
    """An install ships no `lessons/solutions/` (red team 96): a lesson that names it says where it is."""
    text = re.sub(r"\s+", " ", " ".join(c.source for c in nbformat.read(lesson, as_version=4).cells))
    where = "`lessons/solutions/` of a checkout of flashsim (an install ships none)"
    assert text.count("lessons/solutions/") == text.count(where), lesson.name


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_is_titled_lesson_n(lesson):
    """`flashsim lessons list` shows each title: "Lesson 10 · …" like "Lesson 1 · …", not "10 · …" (red team 96)."""
    first = nbformat.read(lesson, as_version=4).cells[0].source.splitlines()[0]
    assert first.startswith(f"# Lesson {int(lesson.name[:2])} · "), first


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_states_its_goal_and_ends_with_exercises(lesson):
    nb = nbformat.read(lesson, as_version=4)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and "you will be able to" in first.source.lower()
    names = [exercise_name(c) for c in nb.cells if exercise_name(c)]
    assert names, f"{lesson.name}: no cell tagged exercise:NAME"
    assert sorted(names) == sorted(solutions(lesson)), "every exercise has exactly one reference solution"


@pytest.mark.parametrize("solved", [False, True], ids=["unsolved", "solved"])
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_runs_top_to_bottom(lesson, solved):
    nb = execute(lesson, solved)
    printed = outputs(nb)
    marks = [m.group(1) for m in CHECK_LINE.finditer(printed)]
    assert marks, f"{lesson.name}: no check printed a verdict"
    want = "✓" if solved else "…"
    wrong = [line for line in printed.splitlines() if CHECK_LINE.match(line) and not line.startswith(want)]
    assert not wrong, f"{lesson.name} ({'solved' if solved else 'unsolved'}): {wrong}"
    assert outputs(nb, "stderr") == "", f"{lesson.name} printed on stderr (a warning?)"
    assert f"{UNLABELLED} []" in printed, f"{lesson.name}: figures need axis labels with units"
