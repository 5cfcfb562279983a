"""`sim.lab.lessons.check`: one line per verdict, for right, wrong, unfinished and crashing answers."""

from functools import reduce

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sim.algorithms.softmax import SoftmaxState
from sim.lab.lessons import Counted, check, hint, returning, verdict


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
    assert (
        verdict("O_i", np.zeros((2, 3)), np.zeros((3, 2))).line == "✗ O_i: shape (2, 3), expected (3, 2) (transposed?)"
    )
    line = verdict("O_i", np.array([1.0, 2.0, 3.5]), np.array([1.0, 2.0, 3.0])).line
    assert line == "✗ O_i: 1 of 3 values differ; first at index (2,): got 3.5, expected 3"
    line = verdict("reads", 4096, 2048, unit="B").line
    assert line == "✗ reads: got 4,096 B, expected 2,048 B: 2,048 B too many (2× the right count)"
    assert not verdict("reads", 2048.0, 2048, unit="B").ok  # a count is a whole number
    line = verdict("state", SoftmaxState(np.array([1.0]), np.array([2.0])), SoftmaxState.of(np.array([[0.0, 1.0]])))
    assert line.line == "✗ state: ℓ: got 2, expected 1.36788"
    assert verdict("pair", (1.0,), (1.0, 2.0)).line == "✗ pair: expected 2 values, got 1"
    assert verdict("pair", 1.0, (1.0, 2.0)).line == "✗ pair: expected a tuple of 2, got float"


def test_a_crash_shows_the_students_line_and_message():
    def merge(m1, m2):
        m = max(m1, m2)  # Python's max on arrays: the truth value of an array is ambiguous
        return m

    v = verdict("merge", lambda: merge(np.ones(2), np.zeros(2)), 0.0)
    first, code = v.line.split("\n")
    line = merge.__code__.co_firstlineno + 1
    assert v.ok is False and first.startswith(f"✗ merge: your code raised ValueError in merge, line {line}: The truth")
    assert code == "    m = max(m1, m2)  # Python's max on arrays: the truth value of an array is ambiguous"


def test_a_crash_in_the_checks_call_is_one_line_and_its_code():
    v = verdict("update", lambda: np.ones(2) @ np.ones(3), 0.0)
    first, code = v.line.split("\n")
    assert first.startswith("✗ update: your code raised ValueError calling your code, line ")
    assert code.strip() == 'v = verdict("update", lambda: np.ones(2) @ np.ones(3), 0.0)'


def test_check_prints_the_line_and_returns_nothing(capsys):
    assert check("update", stub, 3.0) is None
    assert capsys.readouterr().out == "… update: not yet — m_new = max(m, x)\n"


def test_named_values_say_which_one_differed():
    expected = {"m_new": 3.0, "ℓ_new": 1.0}
    assert verdict("update", (3.0, 1.0), expected).ok is True
    assert (
        verdict("update", (3.0, 2.0), expected).line
        == "✗ update: ℓ_new: got 2, expected 1 — 2× the expected: a factor missing or extra"
    )
    assert verdict("update", (1.0, 3.0), expected).line == (
        "✗ update: m_new: got 1, expected 3 — your ℓ_new holds it: return m_new, ℓ_new in that order"
    )
    assert verdict("update", (3.0,), expected).line == "✗ update: return 2 values (m_new, ℓ_new), not 1"
    assert verdict("update", {"m_new": 3.0}, expected).line == "✗ update: got a dict; return the tuple (m_new, ℓ_new)"


def _update_as_dict(m, ℓ, x):
    m_new = max(m, x)
    return {"m_new": m_new, "ℓ_new": ℓ * np.exp(m - m_new) + np.exp(x - m_new)}


def test_a_result_fed_back_in_is_held_to_its_tuple_before_it_is_fed():
    step = returning(_update_as_dict, "m_new", "ℓ_new")
    expected = {"m_new": 2.0, "ℓ_new": 1 + np.exp(-1)}
    line = verdict("pass", lambda: reduce(lambda s, x: step(*s, x), [1.0, 2.0], (-np.inf, 0.0)), expected).line
    assert line == "✗ pass: _update_as_dict: got a dict; return the tuple (m_new, ℓ_new)"
    assert verdict("one", lambda: step(-np.inf, 0.0, 3.0), expected).line == line.replace("pass", "one")
    listed = returning(lambda m, ℓ, x: list(_update_as_dict(m, ℓ, x).values()), "m_new", "ℓ_new")
    assert verdict("pass", lambda: reduce(lambda s, x: listed(*s, x), [1.0, 2.0], (-np.inf, 0.0)), expected).ok
    nothing = returning(lambda m, ℓ, x: None, "m_new", "ℓ_new")
    assert verdict("pass", lambda: nothing(-np.inf, 0.0, 1.0), expected).line == (
        "✗ pass: <lambda>: got None: your function returns nothing — a `return` missing?"
    )


def test_array_differences_say_what_they_look_like():
    e = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert verdict("O", e * 2, e).line.endswith("— 2× the expected: a factor missing or extra")
    rows = e * np.array([[2.0], [5.0]])  # each row its own factor: a missing ÷ ℓ
    assert "each row is off by a factor of its own" in verdict("O", rows, e).line
    assert "overflow to inf" in verdict("O", np.array([np.inf, 1.0]), np.array([2.0, 1.0])).line
    assert "a NaN" in verdict("O", np.array([np.nan, 1.0]), np.array([2.0, 1.0])).line
    assert "(transposed?)" in verdict("O", e.T[:, :1].T, e[:, :1]).line
    assert "off by one" in verdict("n", 601, 602).line
    assert "values differ" in verdict("O", np.array([1.0, 5.0]), np.array([2.0, 3.0])).line


def test_a_number_held_to_a_models_loose_tolerance_names_a_factor_or_a_reciprocal():
    model = 1 + 1 / 128  # 1 exponential per score, and the rows' rescaling the model counts beside it
    assert (
        verdict("r", 2.0, model, rtol=0.02).line
        == "✗ r: got 2, expected 1.00781 — 2× the expected: a factor missing or extra"
    )
    assert verdict("r", 2.0, model / 2, rtol=0.02).line.endswith(
        "— the reciprocal of the expected: a ratio upside down?"
    )
    assert verdict("r", 2.0, model).line == "✗ r: got 2, expected 1.00781"  # a tight tolerance: no factor claimed
    assert verdict("r", 1.3, model, rtol=0.02).line == "✗ r: got 1.3, expected 1.00781"  # near no simple factor


def test_a_count_off_by_one_says_so():
    line = verdict("rows", 2_198, 2_199, unit="rows").line
    assert (
        line == "✗ rows: got 2,198 rows, expected 2,199 rows: 1 rows too few — off by one: rounding up or down, < or ≤?"
    )


def test_a_byte_difference_names_the_tensor_that_moves_as_many():
    expected = Counted(14_400, {"Q": 3_200, "K": 4_800, "V": 4_800, "L": 1_600})
    assert verdict("reads", 14_400, expected, unit="B").ok is True
    line = verdict("reads", 14_400 - 1_600, expected, unit="B").line  # 1,600 B: only L moves that many
    assert line == "✗ reads: got 12,800 B, expected 14,400 B: 1,600 B too few — as many as L (1,600 B): left out?"
    line = verdict("reads", 14_400 + 4_800, expected, unit="B").line
    assert "4,800 B too many — as many as K or V (4,800 B): counted too often?" in line
    line = verdict("reads", 14_400 + 1_200, expected, unit="B").line  # a quarter of one pass over K and V
    assert "1/8 of K and V together (9,600 B)" in line
    assert verdict("r", 15_000, Counted(14_400, {}), unit="B").line.endswith("600 B too many (1.042× the right count)")


def test_counted_subtracts_part_by_part():
    extra = Counted(10, {"q": 4, "O_p": 6}) - Counted(3, {"q": 3})
    assert int(extra) == 7 and extra.parts == {"q": 1, "O_p": 6}


def test_hint_steps_through_the_exercise_that_last_failed(capsys):
    verdict("one update", lambda: (_ for _ in ()).throw(NotImplementedError("write it")), 0.0, exercise="merge")
    hint(1)
    first = capsys.readouterr().out
    assert first.startswith("merge · hint 1 of 3, a question (then hint(2)): ") and "?" in first
    hint(3)
    assert capsys.readouterr().out.startswith("merge · hint 3 of 3, the shape of the code (the last hint): ")
    hint(4)
    assert (
        capsys.readouterr().out
        == "merge has 3 hints; its reference solution is in lessons/solutions/03_online_softmax.py\n"
    )
    hint(1, "online_update")
    assert capsys.readouterr().out.startswith("online_update · hint 1 of 3")
    hint(0)
    assert capsys.readouterr().out == "hints are numbered from 1: hint(1) for merge\n"
    hint(1, "no_such_exercise")
    assert "no hints for 'no_such_exercise'" in capsys.readouterr().out


def test_a_not_yet_with_hints_says_how_to_ask():
    line = verdict("m", stub, 3.0, exercise="online_update").line
    assert line == "… m: not yet — m_new = max(m, x) · stuck? hint(1)"


ANSWERS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.just(10**400) | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
EXPECTED = [
    3.0,
    np.arange(4.0).reshape(2, 2),
    {"m_new": 3.0, "ℓ_new": np.ones(2)},
    (1.0, 2.0),
    SoftmaxState(np.zeros(1), np.ones(1)),
]


@given(ANSWERS, st.sampled_from(EXPECTED))
def test_any_answer_gets_a_verdict_never_a_traceback(answer, expected):
    v = verdict("x", answer, expected)
    assert v.line.startswith(("✓ x", "✗ x: ")) and v.line.count("\n") <= 1


@given(ANSWERS)
def test_any_answer_to_a_count_gets_a_verdict(answer):
    v = verdict("bytes", answer, Counted(1_000, {"Q": 400, "K": 600}), unit="B")
    assert v.line.startswith(("✓ bytes", "✗ bytes: "))


def returned_nothing():
    m_new = 3.0  # noqa: F841 — the student's last line: computed, never returned


def test_an_answer_of_none_says_a_return_is_missing_not_a_nan():
    """A function without `return` gives None: the line says so, where it used to say "got nan … inf − inf"."""
    for answer, expected in [
        (returned_nothing, 3.0),
        (None, np.ones((2, 2))),
        ((None, 1.0), (2.0, 1.0)),
        ((3.0, None), {"m_new": 3.0, "ℓ_new": 1.0}),
    ]:
        line = verdict("update", answer, expected).line
        assert line.startswith("✗ update: ") and "None" in line and "`return`" in line, line
        assert "NaN" not in line and "nan" not in line and "shape" not in line, line


NOT_REAL = st.one_of(
    st.none(),
    st.floats(-1e6, 1e6).map(str),
    st.complex_numbers(max_magnitude=1e6, allow_nan=False).filter(lambda z: z.imag != 0),
)


@given(NOT_REAL, st.sampled_from([(), (3,), (2, 2)]))
def test_an_answer_that_is_no_real_number_never_passes(x, shape):
    """None, a number written as a string, a complex number: ✗, alone or in an array, whatever it would equal
    (NumPy would read "3.0" as 3.0, None as NaN and drop an imaginary part)."""
    answer = x if shape == () else np.full(shape, x, dtype=object if x is None else None)
    if isinstance(x, complex):
        expected = np.full(shape, x.real)
    elif isinstance(x, str):
        expected = np.full(shape, float(x))
    else:
        expected = np.full(shape, np.nan)
    line = verdict("x", answer, expected).line
    assert line.startswith("✗ x: ") and line.count("\n") == 0, line


def test_a_low_precision_answer_is_called_rounding_only_within_a_few_roundings():
    from sim.lab.feedback import difference

    # review h73: 64 eps of the largest value called a 12% error, and a 10% one beside a large value, rounding
    assert "rounding" not in difference(np.float16(1.12), 1.0, 1e-9, 0, "")
    assert "rounding" not in difference(np.array([0.001, 100], np.float32), np.array([0.0011, 100.0]), 1e-9, 0, "")
    near = difference(np.float32(356.58533), 356.585324, 1e-9, 0, "")
    assert near == "got 356.58533, expected 356.58532 — float32's rounding: compute in float64 (NumPy's default)"


@given(
    st.floats(allow_nan=False, width=64) | st.sampled_from((1e300, 1e-300, 5e307, 1e-310)),
    st.floats(allow_nan=False, width=64) | st.sampled_from((1e-10, 1e10, 1e-307)),
    st.sampled_from((0.0, 0.02, 0.5)),
)
def test_any_two_numbers_get_one_line_without_a_warning(answer, expected, rtol):
    """Red team 87: check('x', 1e300, 1e-10) raised OverflowError (round(inf) in the factor hint) under NumPy's
    overflow warnings."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = verdict("x", answer, expected, rtol=rtol)
    assert "\n" not in v.line and v.line.startswith(("✓", "✗"))


def test_an_answer_that_raises_when_read_or_never_ends_gets_one_line():
    """Red team 92: an answer whose __array__ raised RuntimeError (a tensor that requires grad) raised out of
    check(); an endless generator checked against named values never returned."""
    import itertools

    class Raises:
        def __array__(self, *args, **kwargs):
            raise RuntimeError("Can't call numpy() on Tensor that requires grad")

        def __float__(self):
            raise RuntimeError("no")

    v = verdict("m_new", Raises(), 3.0)
    assert v.ok is False and "\n" not in v.line and v.line.startswith("✗ m_new")
    v = verdict("state", lambda: (x for x in itertools.count()), {"m": 1.0, "ℓ": 2.0})
    assert v.ok is False and v.line == "✗ state: return 2 values (m, ℓ), not more than 2"
    v = verdict("state", np.zeros((10, 4)), {"m": 1.0, "ℓ": 2.0})  # red team 93: "not 3" for ten rows
    assert v.line == "✗ state: return 2 values (m, ℓ), not 10"


def test_an_infinity_among_the_expected_values_does_not_make_every_difference_a_rounding():
    line = verdict("m", np.array([1, np.inf], np.float32), np.array([2, np.inf])).line  # red team 92
    assert line.startswith("✗ m: 1 of 2 values differ") and "rounding" not in line
