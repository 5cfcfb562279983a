"""What a wheel ships of the course: the assignments' student copies, made from the masters at build time, never the
masters; and what an install of flashsim does with them (lists and exports them, refuses to grade by name)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sim.core.errors import InputError
from sim.grading import bench, export, spec
from sim.lab import course, hints
from tests.cli_runner import error_line, flashsim

ROOT = Path(__file__).resolve().parent.parent
MASTERS = spec.masters()
TINY = ROOT / "tests" / "grading_submissions" / "tiny" / "01_tiny_softmax.py"
NO_NUMPY = "import sys; sys.modules.update(dict.fromkeys(('numpy', 'rich', 'click', 'ml_dtypes')))"
STUDENT_COPIES_ONLY = "this install of flashsim holds the assignments' student copies only;"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """setup.py's build_py run on a copy of the tree (as pip's isolated build runs it: no NumPy, rich or click)."""
    top = tmp_path_factory.mktemp("wheel")
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, top / name)
    for name in ("sim", "gpu", "lessons"):
        shutil.copytree(ROOT / name, top / name, ignore=shutil.ignore_patterns("__pycache__"))
    run = (
        f"{NO_NUMPY}; sys.argv = ['setup.py', '-q', 'build_py', '-d', 'out']; import runpy; runpy.run_path('setup.py')"
    )
    done = subprocess.run([sys.executable, "-c", run], cwd=top, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return top / "out" / "flashsim_lessons"


def test_the_build_ships_each_masters_student_copy_and_none_of_the_lessons_answers(built):
    # before: the wheel shipped lessons/assignments/*.py as they are, the masters: every solution and hidden test
    # went to each student who pip-installed flashsim (red team F1)
    shipped = sorted(built.glob("assignments/*.py"))
    assert [p.name for p in shipped] == [m.name for m in MASTERS]
    for master, copy in zip(MASTERS, shipped, strict=True):
        text = copy.read_text(encoding="utf-8")
        assert text == export.student_text(master.read_text(encoding="utf-8"))
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
        assert all(t["visibility"] == "public" for t in spec.load(copy).tests)
    # the lessons' worked answers stay out: lesson 3's online_update is assignment 01's update (red team, round 2)
    assert (ROOT / "lessons" / "solutions" / "03_online_softmax.py").is_file() and not (built / "solutions").exists()


@pytest.fixture
def installed(built, tmp_path, monkeypatch) -> Path:
    """flashsim as an install sees the course: no checkout beside sim, the package flashsim_lessons on the path."""
    site = tmp_path / "site"
    shutil.copytree(built, site / course.INSTALLED)
    monkeypatch.setattr(course, "CHECKOUT", tmp_path / "no checkout" / "lessons")
    monkeypatch.syspath_prepend(str(site))
    assert not course.masters_here()
    return site / course.INSTALLED / "assignments"


def test_an_install_lists_and_exports_the_student_copies(installed, tmp_path):
    listed = flashsim("assignments", "list", env={"COLUMNS": "200"}).output
    assert "these are the student copies" in listed and "no solutions" in listed
    assert sum(line.lstrip().startswith(m.stem) for line in listed.splitlines() for m in MASTERS) == len(MASTERS)
    head = listed.splitlines()[0].split()  # a copy's points are its public tests' (red team 96: 40, beside "100 each")
    assert "hidden" not in head and head[-2:] == ["public", "points"]
    row = next(line.replace("│", " ").split() for line in listed.splitlines() if line.lstrip().startswith("02_flash1"))
    public = [t for t in spec.load(MASTERS[1]).tests if t["visibility"] == "public"]
    assert row[-1] == f"{sum(t['points'] for t in public):g}" and row[-2] == str(len(public))
    flashsim("assignments", "export", "02", "--student", tmp_path / "handout")
    copy = (tmp_path / "handout" / "02_flash1_forward.py").read_text(encoding="utf-8")
    assert copy == (installed / "02_flash1_forward.py").read_text(encoding="utf-8")


def test_an_install_refuses_to_grade_or_export_the_master_from_a_student_copy(installed, tmp_path):
    need = "needs the master file, from a checkout of flashsim (give its path)"
    line = error_line(flashsim("assignments", "export", "02", "--instructor", tmp_path / "x", code=2))
    assert line == f"error: assignments export --instructor: {STUDENT_COPIES_ONLY} the instructor's copy {need}"
    assert not (tmp_path / "x").exists()
    for name in ("02", installed / "02_flash1_forward.py"):
        line = error_line(flashsim("grade", name, TINY, code=2))
        assert line == f"error: grade: {STUDENT_COPIES_ONLY} grading {need}"
    with pytest.raises(InputError, match=f"^bench grade: {STUDENT_COPIES_ONLY} it needs the master file"):
        bench.submissions(tmp_path, 1)


def test_an_install_grades_a_master_by_its_path_and_self_checks_a_students_copy(installed, tmp_path):
    assert "2 / 2" in flashsim("grade", TINY, TINY, "--seed", 1).output  # its public and its hidden test
    mine = tmp_path / "02_flash1_forward.py"
    mine.write_bytes(MASTERS[1].read_bytes())  # the checkout's master of 02: its solution passes
    assert "40 / 40" in flashsim("grade", "--self-check", mine, "--seed", 1).output  # its public tests only


def test_an_install_s_last_hint_says_the_answer_is_in_a_checkout(installed):
    assert hints.text("merge", 4) == (
        "merge has 3 hints; its reference solution is in lessons/solutions/03_online_softmax.py of a checkout of "
        "flashsim (an install ships none)"
    )
