"""`sim.lab.lessons.check`: one line per verdict, for right, wrong, unfinished and crashing answers."""

import numpy as np

from sim.algorithms.softmax import SoftmaxState
from sim.lab.lessons import check, verdict


def stub():
    raise NotImplementedError("m_new = max(m, x)")


def test_right_answers_pass():
    assert verdict("scalar", 0.1 + 0.2, 0.3).ok is True
    assert verdict("array", lambda: np.arange(3) / 3, [0, 1 / 3, 2 / 3]).ok is True
    assert verdict("infinities", [-np.inf, 1.0], np.array([-np.inf, 1.0])).ok is True
    assert verdict("tuple", (1.0, np.ones(2)), (1.0, np.ones(2))).ok is True
    assert verdict("bytes", 2048, 2048, unit="B").ok is True
    state = SoftmaxState.of(np.array([[1.0, 2.0]]))
    assert verdict("state", state, SoftmaxState(np.array([2.0]), np.array([1 + np.exp(-1)]))).ok is True


def test_a_stub_is_not_yet_with_its_hint():
    v = verdict("update", stub, 3.0)
    assert v.ok is None and v.line == "… update: not yet — m_new = max(m, x)"


def test_wrong_values_name_what_differed():
    assert verdict("O_i", np.zeros((2, 3)), np.zeros((3, 2))).line == "✗ O_i: shape (2, 3), expected (3, 2)"
    line = verdict("O_i", np.array([1.0, 2.0, 3.5]), np.array([1.0, 2.0, 3.0])).line
    assert line == "✗ O_i: 1 of 3 values differ; first at index (2,): got 3.5, expected 3"
    line = verdict("reads", 4096, 2048, unit="B").line
    assert line == "✗ reads: got 4,096 B, expected 2,048 B (2.00× the right count)"
    assert not verdict("reads", 2048.0, 2048, unit="B").ok  # a count is a whole number
    line = verdict("state", SoftmaxState(np.array([1.0]), np.array([2.0])), SoftmaxState.of(np.array([[0.0, 1.0]])))
    assert line.line.startswith("✗ state: ℓ: 1 of 1 values differ")
    assert verdict("pair", (1.0,), (1.0, 2.0)).line == "✗ pair: expected 2 values, got 1"
    assert verdict("pair", 1.0, (1.0, 2.0)).line == "✗ pair: expected a tuple of 2, got float"


def test_a_crash_is_one_line():
    v = verdict("merge", lambda: np.ones(2) @ np.ones(3), 0.0)
    assert v.ok is False and v.line.startswith("✗ merge: your code raised ValueError: ") and "\n" not in v.line


def test_check_prints_the_line_and_returns_nothing(capsys):
    assert check("update", stub, 3.0) is None
    assert capsys.readouterr().out == "… update: not yet — m_new = max(m, x)\n"
