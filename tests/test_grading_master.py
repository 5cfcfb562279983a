"""Which file a name makes the master, and the report naming the one it graded with (red team W3: a folder ./02
holding one NN_*.py became assignment 02's master, and nothing said so)."""

import shutil
from pathlib import Path

import pytest

from sim.core.errors import InputError
from sim.grading import spec
from sim.lab import course
from tests.cli_runner import error_line, flashsim

TINY = Path(__file__).parent / "grading_submissions" / "tiny" / "01_tiny_softmax.py"


def test_a_name_that_is_both_a_path_here_and_an_assignment_is_refused_naming_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "02").mkdir()
    shutil.copy(TINY, tmp_path / "02" / TINY.name)
    said = "assignment: 02 is both ./02 and the assignment 02_flash1_forward; write ./02 or 02_flash1_forward"
    with pytest.raises(InputError) as e:
        spec.locate("02")
    assert str(e.value) == said
    assert error_line(flashsim("grade", "02", tmp_path / "02", code=2)) == f"error: {said}"
    assert spec.locate("./02") == tmp_path / "02" / TINY.name  # written as a path: the folder's file
    assert spec.locate("02_flash1_forward") == spec.locate("2") == course.assignments() / "02_flash1_forward.py"
    (tmp_path / "02_flash1_forward").write_text("")  # a file named as the assignment: its master's path is the way
    with pytest.raises(InputError, match=f"write ./02_flash1_forward or {course.assignments()}/02_flash1_forward.py$"):
        spec.locate("02_flash1_forward")
    shutil.copy(TINY, tmp_path / "02_flash1_forward.py")
    assert spec.locate("02_flash1_forward.py") == tmp_path / "02_flash1_forward.py"  # a .py name is a path


def test_the_report_and_a_folders_summary_say_which_master_they_graded_with(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    for name in ("a.py", "b.py"):
        shutil.copy(TINY, folder / name)
    line = f"graded with {TINY}"  # the table's caption is centred: its line stripped
    for what in (folder / "a.py", folder):  # one submission's report; a folder's summary
        out = flashsim("grade", TINY, what, "--seed", 2, "--jobs", 1, env={"COLUMNS": "300"}).output
        assert line in [x.strip() for x in out.splitlines()], out


@pytest.mark.parametrize(
    "extra, name",
    [
        ('TESTS += [{"name": "secret", "visibility": "hidden", "points": 1, "check": "output"}]\n', "TESTS"),
        ('TESTS.append({"name": "secret"})\n', "TESTS"),
        ("TESTS = []\n", "TESTS"),
        ("GRADING.update(timeout_s=1)\n", "GRADING"),
        ("def f():\n    return len(TESTS)\n", "TESTS"),
        # red team 85: rebound without a Name node
        ("import json as TESTS\n", "TESTS"),
        ("from os import path as GRADING\n", "GRADING"),
        ("def GRADING(): return 1\n", "GRADING"),
        ("class TESTS: pass\n", "TESTS"),
        ("try:\n    pass\nexcept Exception as TESTS:\n    pass\n", "TESTS"),
    ],
)
def test_a_master_that_names_its_tests_outside_their_literal_is_refused(tmp_path, extra, name):
    """Red team 84: `TESTS += [hidden]` was read by neither the grader nor export: the test was never graded and
    shipped in the student's copy."""
    master = tmp_path / TINY.name
    master.write_text(TINY.read_text() + "\n" + extra)
    at = next(n for n, text in enumerate(extra.splitlines(), 1) if name in text)
    line = len(TINY.read_text().splitlines()) + 1 + at
    with pytest.raises(InputError, match=rf"^assignment: {TINY.name} line \d+: {name} is named outside its one "):
        spec.load(master)
    assert f"line {line}: {name} is named outside" in error_line(flashsim("assignments", "export", master, "--student",
                                                                          tmp_path / "out", code=2))  # fmt: skip


def test_a_master_with_a_nul_byte_is_refused_in_one_line(tmp_path):
    """Python 3.11.2's parser raises ValueError on a NUL byte (3.11.7's SyntaxError): it was a traceback there."""
    master = tmp_path / TINY.name
    master.write_bytes(TINY.read_bytes() + b"\n\x00\n")
    with pytest.raises(InputError, match=rf"^assignment: {TINY.name}( line \d+)?: source code string cannot contain"):
        spec.load(master)
    assert "null bytes" in error_line(flashsim("grade", master, master, code=2))
