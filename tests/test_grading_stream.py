"""Assignment 01's `update` sees one column at a time: the grader keeps X and checks each state (sim.grading.stream).

Before, the driver held X whole in the submission's process and one `update` that read it from its caller's frame
and returned the batch max and sum scored the update tests (review of 2026-11-28)."""

from dataclasses import replace

import numpy as np
import pytest

from sim.grading import grader, problem, spec, stream

PEEKS = """
import sys
import numpy as np


def update(m, l, x):
    X = sys._getframe(1).f_locals["X"]  # the whole stream, where the driver used to hold it
    return X.max(axis=1), np.exp(X - X.max(axis=1)[:, None]).sum(axis=1)


def merge(m1, l1, m2, l2):
    raise NotImplementedError
"""

# finds the pipe to the grader and asks for the next column before handing back any state
READS_AHEAD = """
import gc
import numpy as np
from sim.grading.proxy import Link


def update(m, l, x):
    link = next(o for o in gc.get_objects() if isinstance(o, Link))
    link.request({"op": "load", "buf": "y", "tensor": "X", "cols": [1, 2]})
    return np.maximum(m, x), l


def merge(m1, l1, m2, l2):
    raise NotImplementedError
"""

# right only at the end: it keeps every column and returns zeros until it has them all (the length read from the
# driver's frame), then the batch state
LATE = """
import sys
import numpy as np
SEEN = []


def update(m, l, x):
    SEEN.append(x)
    if len(SEEN) < sys._getframe(1).f_locals["length"]:
        return np.zeros_like(x), np.zeros_like(x)
    X = np.stack(SEEN, axis=1)
    SEEN.clear()
    return X.max(axis=1), np.exp(X - X.max(axis=1)[:, None]).sum(axis=1)


def merge(m1, l1, m2, l2):
    raise NotImplementedError
"""


def update_tests(tmp_path, source: str):
    path = tmp_path / "student.py"
    path.write_text(source)
    assignment = spec.load(spec.locate("01"))
    assignment = replace(assignment, tests=tuple(t for t in assignment.tests if t["check"] == "update"))
    (report,) = grader.grade(assignment, [path], seed=5, jobs=1)
    return report.tests


def test_update_cannot_read_x_from_its_callers_frame(tmp_path):
    tests = update_tests(tmp_path, PEEKS)
    assert tests and all(t.points == 0 for t in tests)
    assert all(t.feedback.startswith("raised KeyError: 'X'") for t in tests), [t.feedback for t in tests]


def test_a_column_asked_for_ahead_of_the_state_is_refused(tmp_path):
    tests = update_tests(tmp_path, READS_AHEAD)
    assert all(t.points == 0 for t in tests)
    assert all(t.feedback == "asked for column 1 of X before handing back the state after column 0" for t in tests), [
        t.feedback for t in tests
    ]


def test_a_state_right_only_at_the_end_fails_at_its_first_column(tmp_path):
    tests = update_tests(tmp_path, LATE)
    multi = [t for t in tests if not t.feedback.startswith("correct")]
    assert multi and all(t.points == 0 for t in multi)
    assert all(t.feedback.startswith("after column 0: m[") for t in multi), [t.feedback for t in multi]


@pytest.fixture
def served():
    test = {"name": "t", "visibility": "public", "points": 1, "check": "update", "rows": 3, "length": 5}
    return stream.ColumnServer(problem.make(spec.load(spec.locate("01")).grading, test, 2))


def column_request(t: int) -> dict:
    return {"op": "load", "buf": "x", "tensor": "X", "cols": [t, t + 1]}


def test_each_column_is_xs_and_each_state_is_checked_against_its_prefix(served):
    X = served.problem.inputs["X"]
    for t in range(X.shape[1]):
        reply, (x,) = served.handle(column_request(t), [])
        assert reply["op"] == "tile" and np.array_equal(x, X[:, t])
        m = X[:, : t + 1].max(axis=1)  # the definition, in float64
        ℓ = np.exp(X[:, : t + 1] - m[:, None]).sum(axis=1)
        assert served.handle({"op": "store", "tensor": "state", "buf": "x"}, [np.stack([m, ℓ])]) is None
    assert served.error is None
    reply, _ = served.handle(column_request(X.shape[1]), [])
    assert reply["op"] == "refused" and served.error == "asked for column 5 of X, which has 5 columns"


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"op": "load", "buf": "x", "tensor": "Q", "cols": [0, 1]}, "asked for 'Q' rows None cols [0, 1] where"),
        ({"op": "load", "buf": "x", "tensor": "X", "cols": [0, 2]}, "asked for 'X' rows None cols [0, 2] where"),
        ({"op": "store", "tensor": "state", "buf": "x"}, "stored 'state' rows None cols None where the state"),
        ({"op": "put", "buf": "x", "nbytes": 8}, "sent 'put', which the online softmax's driver never sends"),
    ],
)
def test_a_request_out_of_turn_ends_the_test(served, request_, error):
    reply = served.handle(request_, [np.zeros((2, 3))])
    assert served.error.startswith(error)
    assert reply is None or reply[0]["op"] == "refused"
    assert served.handle(column_request(0), [])[0]["op"] == "refused"  # and nothing is served after it


def test_a_wrong_state_names_the_column_and_the_element(served):
    X = served.problem.inputs["X"]
    served.handle(column_request(0), [])
    wrong = np.stack([X[:, 0], np.full(3, 2.0)])  # ℓ after one column is 1
    served.handle({"op": "store", "tensor": "state", "buf": "x"}, [wrong])
    assert served.error.startswith("after column 0: ℓ[0] is 2 where the reference is 1 ")
