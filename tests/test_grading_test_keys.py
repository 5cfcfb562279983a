"""An edited copy of an assignment whose test holds a key of the wrong type or range: `grade --self-check` and
`assignments export --student` refuse it in one line naming the test and the key (red team 72: tracebacks)."""

import re

import pytest
from click.testing import CliRunner
from test_cli_hostile_files import error_line

from sim.cli import app
from sim.grading import spec

GOOD = {"name": "t", "visibility": "public", "points": 10, "check": "output",
        "N": [4, 16], "Nk": "N", "d": 8, "dtype": "fp32", "Br": 16, "Bc": 16}  # fmt: skip
SOFTMAX = {"name": "t", "visibility": "public", "points": 10, "check": "update", "rows": [1, 4], "length": [1, 8]}
ABSENT = object()

BAD = [
    ("02", "dtype", [["fp32"]]), ("02", "dtype", []), ("02", "dtype", 3), ("02", "N", "abc"), ("02", "N", -5),
    ("02", "N", [16, 4]), ("02", "N", [4]), ("02", "N", True), ("02", "N", 10**12), ("02", "N", 4.5),
    ("02", "Nk", "M"), ("02", "d", 0), ("02", "Br", ABSENT), ("02", "Bc", None), ("02", "Br", 0),
    ("02", "logit_scale", "x"), ("02", "logit_scale", float("inf")), ("02", "sram_slack", "x"),
    ("02", "sram_slack", 0), ("02", "sram", "x"), ("02", "timeout_s", "x"), ("02", "timeout_s", -1),
    ("02", "io_full", "x"), ("02", "io_zero", [1]), ("02", "causal", "yes"), ("02", "window", 3),
    ("02", "window", [[5, 1], 0]), ("02", "window", ["a", 0]),
    ("01", "rows", ABSENT), ("01", "length", [3, "x"]), ("01", "masked", 2.0), ("01", "empty_row", 1),
    # red team 86: points 1e999 graded "inf / inf" and wrote "score": Infinity to results.json
    ("02", "points", float("inf")), ("02", "points", True), ("02", "points", 10**7), ("01", "points", 0),
    ("01", "points", ABSENT), ("01", "points", "5"),
]  # fmt: skip


def edited(tmp_path, number: str, key: str, value):
    """A copy of master `number` whose only test has `key` set to `value` (or removed)."""
    master = spec.locate(number)
    test = dict(GOOD if number == "02" else SOFTMAX)
    if value is ABSENT:
        del test[key]
    else:
        test[key] = value
    text = re.sub(r"(?ms)^TESTS = \[.*?^\]", lambda m: f"TESTS = [{test!r}]", master.read_text(encoding="utf-8"))
    path = tmp_path / master.name
    path.write_text(text.replace(": inf", ": 1e999"), encoding="utf-8")  # a literal that ast reads as inf
    return path


@pytest.mark.parametrize("number, key, value", BAD)
def test_a_bad_key_is_refused_in_one_line_by_self_check_and_export(tmp_path, number, key, value):
    path = edited(tmp_path, number, key, value)
    for args in (["grade", "--self-check", str(path), "--seed", "1"],
                 ["assignments", "export", str(path), "--student", str(tmp_path / "out")]):  # fmt: skip
        line = error_line(CliRunner().invoke(app, args))
        assert "test 't'" in line and key in line, line


@pytest.mark.parametrize("number", ["02", "01"])
def test_the_unedited_test_still_loads(tmp_path, number):
    assert spec.load(edited(tmp_path, number, "name", "t")).tests[0]["name"] == "t"


@pytest.mark.parametrize(
    "old, new, said",
    [  # before: every test failed with "TypeError: attribute name must be string" or was "not graded (KeyError)"
        ('"entry": "forward"', '"entry": 5', "GRADING['entry'] must be a function's name; got 5"),
        ('"ℓ": "fp32", "m": "fp32"', '"weird": "fp32", "m": "fp32"', "GRADING['outputs'] must name O, ℓ, m"),
        ('"ℓ": "fp32"', '"ℓ": "int8"', "GRADING['outputs'] takes input, "),
    ],
)
def test_a_bad_grading_entry_or_outputs_is_refused_in_one_line(tmp_path, old, new, said):
    text = spec.locate("02").read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "02_flash1_forward.py"
    path.write_text(text.replace(old, new), encoding="utf-8")
    line = error_line(CliRunner().invoke(app, ["grade", "--self-check", str(path), "--seed", "1"]))
    assert said in line, line


@pytest.mark.parametrize("value, said", [
    ("5", "['forbid'] must be a list of distinct module names (a.b.c); got 5"),
    ('"statistics"', "['forbid'] must be a list of distinct module names (a.b.c); got 'statistics'"),
    ('["sim.algorithms.softmax", "sim.algorithms.softmax"]', "['forbid'] must be a list of distinct module names"),
    ('["sim..algorithms"]', "got ['sim..algorithms']"), ('["sim.import"]', "got ['sim.import']"), ("[5]", "got [5]"),
    ('["statistics"]', "['forbid'] names 'statistics', which every graded process reads"),
    ('["os.path"]', "['forbid'] names 'os.path'"), ('["sim.grading"]', "['forbid'] names 'sim.grading'"),
    ('["sim.grading.wire"]', "['forbid'] names 'sim.grading.wire'"),
    ('["sim.algorithms.softmax"], "title": 5', "GRADING['title'] must be text; got 5"),
    ('["sim.algorithms.softmax"], "causal_argument": 1', "GRADING['causal_argument'] must be true or false; got 1"),
    ('["sim.algorithms.softmax"], "forbd": ["numpy"]', "GRADING has 'forbd', which the grader does not read; it reads "
     "algorithm, causal_argument, driver, entry, forbid, io_hint, outputs, pass, timeout_s, title, window_argument"),
    ('["sim.algorithms.softmax"], 5: 1', "GRADING has 5, which the grader does not read"),
])  # fmt: skip
def test_a_bad_forbid_is_refused_when_the_master_is_loaded(tmp_path, value, said):
    """Red team C3: `"forbid": 5` was a traceback, a string was forbidden letter by letter, a module of the standard
    library made the grader refuse to grade only once it ran. Each is refused as the file is read, in one line."""
    text = spec.locate("01").read_text(encoding="utf-8")
    old = '"forbid": ["sim.algorithms.softmax"]'
    assert text.count(old) == 1
    path = tmp_path / "01_online_softmax.py"
    path.write_text(text.replace(old, f'"forbid": {value}'), encoding="utf-8")
    for args in (["grade", "--self-check", str(path), "--seed", "1"],
                 ["assignments", "export", str(path), "--student", str(tmp_path / "out")]):  # fmt: skip
        line = error_line(CliRunner().invoke(app, args))
        assert line.startswith("error: assignment: 01_online_softmax.py: GRADING") and said in line, line


def test_a_forbid_of_modules_the_child_never_reads_loads(tmp_path):
    path = tmp_path / "01_online_softmax.py"
    text = spec.locate("01").read_text(encoding="utf-8")
    path.write_text(text.replace('["sim.algorithms.softmax"]', '["sim.algorithms", "sim.api.reference"]'), "utf-8")
    assert spec.load(path).grading["forbid"] == ["sim.algorithms", "sim.api.reference"]


def test_a_master_whose_tests_are_not_a_literal_python_can_build_is_refused_in_one_line(tmp_path):
    """Red team 86: a dict keyed by a list parses, but literal_eval raises TypeError (unhashable): a traceback."""
    text = spec.locate("02").read_text(encoding="utf-8")
    path = tmp_path / "02_flash1_forward.py"
    path.write_text(re.sub(r"(?ms)^TESTS = \[.*?^\]", "TESTS = [{[1]: 2}]", text), encoding="utf-8")
    for args in (["grade", "--self-check", str(path), "--seed", "1"],
                 ["assignments", "export", str(path), "--student", str(tmp_path / "out")]):  # fmt: skip
        line = error_line(CliRunner().invoke(app, args))
        assert line == "error: assignment: 02_flash1_forward.py: TESTS must be a literal", line


@pytest.mark.parametrize("tests, said", [
    ("None", "TESTS must be a list of tests; got NoneType"),
    ("5", "TESTS must be a list of tests; got int"),
    ("[{'name': 'one\\nblock', 'visibility': 'public', 'points': 1, 'check': 'output'}]",
     "test name 'one\\nblock' is not one line of printable text"),
    ("[{'name': '  ', 'visibility': 'public', 'points': 1, 'check': 'output'}]", "test name '  ' is not one line"),
    ("[{'name': 'score', 'visibility': 'public', 'points': 1, 'check': 'output'}]",
     "test name 'score' would be read as the CSV's own column or as a formula"),
    ("[{'name': '=1+1', 'visibility': 'public', 'points': 1, 'check': 'output'}]", "test name '=1+1' would be read"),
    ("[{'name': \"'x\", 'visibility': 'public', 'points': 1, 'check': 'output'}]", "test name \"'x\" would be read"),
])  # fmt: skip
def test_a_master_whose_tests_are_not_a_list_of_named_tests_is_refused_in_one_line(tmp_path, tests, said):
    """Red team 88: TESTS = None was a traceback; two tests named "one block" and "one\\nblock" passed the check,
    then printed alike, and the CSV put one's points under the other's column."""
    text = spec.locate("02").read_text(encoding="utf-8")
    path = tmp_path / "02_flash1_forward.py"
    path.write_text(re.sub(r"(?ms)^TESTS = \[.*?^\]", lambda m: f"TESTS = {tests}", text), encoding="utf-8")
    line = error_line(CliRunner().invoke(app, ["grade", "--self-check", str(path), "--seed", "1"]))
    assert line == f"error: assignment: 02_flash1_forward.py: {said}" or said in line, line
