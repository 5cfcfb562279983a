"""The student's copy of every master holds no solution and no hidden test; the instructor's is the master."""

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from sim.cli import app
from sim.core.errors import InputError
from sim.grading import export, spec

MASTERS = spec.masters()


def test_there_are_eight_assignments():
    assert [m.name[:2] for m in MASTERS] == ["01", "02", "03", "04", "05", "06", "07", "08"]


@pytest.mark.parametrize("master", MASTERS, ids=lambda m: m.stem)
def test_the_student_copy_has_stubs_and_public_tests_only(master, tmp_path):
    text = master.read_text()
    student = export.export(master, student=tmp_path)
    copy = student.read_text()
    solution = export.solutions(text)
    assert len(solution) >= 3
    statement = spec.load(master).statement  # public by design: it may quote a signature the solution repeats
    for line in solution:
        if len(line) >= 12 and line not in statement:
            assert line not in copy, line
    assert "BEGIN SOLUTION" not in copy and "END SOLUTION" not in copy and "HIDDEN" not in copy
    full, public = spec.load(master), spec.load(student)
    assert [t for t in full.tests if t["visibility"] == "public"] == list(public.tests)
    for t in full.tests:
        if t["visibility"] == "hidden":
            assert f'"name": "{t["name"]}"' in text and f'"name": "{t["name"]}"' not in copy
    tree = ast.parse(copy)
    stubs = [n for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    assert stubs and all(isinstance(n.exc, ast.Call) and n.exc.func.id == "NotImplementedError" for n in stubs)
    assert all(len(n.exc.args[0].value) > 10 for n in stubs)  # each with a hint
    assert public.statement == full.statement and "How to check yourself" in public.statement


def test_the_instructor_copy_is_the_master_and_an_autograder_folder(tmp_path):
    master = spec.locate("02")
    copy = export.export(master, instructor=tmp_path)
    assert copy.read_bytes() == master.read_bytes()
    folder = tmp_path / "autograder"
    assert sorted(p.name for p in folder.iterdir()) == ["02_flash1_forward.py", "run_autograder", "setup.sh"]
    run = (folder / "run_autograder").read_text()
    assert "flashsim grade 02_flash1_forward.py /autograder/submission" in run
    assert "--gradescope /autograder/results/results.json" in run
    assert (folder / "run_autograder").stat().st_mode & 0o111


@pytest.mark.parametrize("name, extra", [("02", ""), ("07", "[assignments-triton]"), ("08", "[assignments-triton]")])
def test_the_autograder_installs_the_extra_its_driver_needs(tmp_path, name, extra):
    export.export(spec.locate(name), instructor=tmp_path)
    setup = (tmp_path / "autograder" / "setup.sh").read_text()
    assert (
        setup.splitlines()[-1] == f'/autograder/venv/bin/pip install "$(ls /autograder/source/flashsim-*.whl){extra}"'
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("x = 1\n    # BEGIN SOLUTION\n    y = 2\n", "never closed"),
        ("x = 1\n# END SOLUTION\n", "END marker with no BEGIN"),
        ("TESTS = [\n# BEGIN HIDDEN TESTS\n", "never closed"),
    ],
)
def test_broken_markers_are_refused(text, message):
    with pytest.raises(InputError, match=message):
        export.student_text(text)


def test_one_line_solutions_become_stubs():
    text = "def f(x):\n    return x + 1  # SOLUTION: add one\n"
    assert export.student_text(text) == "def f(x):\n    raise NotImplementedError('add one')\n"


def test_export_needs_exactly_one_destination(tmp_path):
    with pytest.raises(InputError, match="exactly one of --student DIR or --instructor DIR"):
        export.export(spec.locate("01"), student=tmp_path, instructor=tmp_path)
    with pytest.raises(InputError, match="no file or assignment named '09'"):
        spec.locate("09")


def test_a_spec_with_a_bad_test_is_refused_with_the_field_named(tmp_path):
    bad = tmp_path / "07_bad.py"
    bad.write_text('GRADING = {"driver": "chip", "entry": "f", "algorithm": "flash1", '
                   '"outputs": {"O": "input", "ℓ": "fp32", "m": "fp32"}}\n'
                   'TESTS = [{"name": "t", "visibility": "public", "points": 5, "check": "speed"}]\n')  # fmt: skip
    with pytest.raises(InputError, match="test 't': check must be one of output, io, memory"):
        spec.load(bad)
    Path(bad).write_text("GRADING = {}\nTESTS = []\n")
    with pytest.raises(InputError, match="driver"):
        spec.load(bad)


def test_a_students_copy_into_the_masters_own_folder_is_refused_and_the_master_kept(tmp_path):
    # before: the student's copy was written over the master, its solution and hidden tests gone (red team h72)
    master = tmp_path / "02_flash1_forward.py"
    master.write_bytes(spec.locate("02").read_bytes())
    before = master.read_bytes()
    result = CliRunner().invoke(app, ["assignments", "export", str(master), "--student", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "is the master itself; export into another folder" in result.output
    assert master.read_bytes() == before
