"""Assignments 7–8: a module constant made by arithmetic (helper 110: `RCP_LN2 = tl.constexpr(1.0 / 0.69…)` was
refused), its value computed on the syntax tree as Python computes it, and a hostile one refused in one line, quickly.
"""

import ast
import math
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.core.errors import InputError
from sim.grading.triton import allowlist, arithmetic

HEADER = (
    "import math\nimport triton\nimport triton.language as tl\n\nA = 7\nC = tl.constexpr(0.5)\nI = tl.constexpr(3)\n"
)
REFUSED = "kernel file line 8: a constant outside a kernel must be a literal or arithmetic of numbers (or tl.constexpr "
REFUSED += "of one): "


def value(text: str) -> arithmetic.Number:
    """`arithmetic`'s value of the constant `NAME = expression` (tl.constexpr of it too), with HEADER's above it."""
    node = ast.parse(text).body[0].value
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "tl.constexpr":
        (node,) = node.args
    numbers = {"A": arithmetic.Number(7), "C": arithmetic.Number(0.5, True), "I": arithmetic.Number(3, True)}
    return arithmetic.value(node, numbers, {"math": "math", "tl": "triton.language"}, {*numbers, "math", "tl"})


@pytest.mark.parametrize(
    "text, expected",
    [  # helper 110's forms, and their like; the values written out by hand
        ("RCP_LN2 = tl.constexpr(1.0 / 0.6931471805599453)", 1.4426950408889634),
        ("BLOCK = 2 * 64", 128),
        ('NEG = -float("inf")', -math.inf),
        ("SCALE_LOG2 = 1 / math.log(2)", 1.4426950408889634),
        ("HALF = tl.constexpr(A // 2 + A % 4 - 2 ** 3)", -2),
        ("ROOT = tl.constexpr(math.sqrt(A * 7) + math.log2(8) - math.pi * 0)", 10.0),
        ("BIG = 2 ** 64 // 2 - 1 - -(2 ** 10) % 3", 2**63 - 3),  # Python's %: -1024 % 3 == 2
        ("TINY = 2 ** -3 + math.log(8, 2) + +math.e ** 0", 4.125),
        ("MADE = tl.constexpr(math.log(I) * 0 + float(I) + I % 2 - C)", 3.5),  # tl.constexpr ints convert
    ],
)
def test_a_module_constant_made_by_arithmetic_is_taken_at_its_value(text, expected):
    assert allowlist.check(HEADER + text + "\n") == set()
    got = value(text).value
    assert type(got) is type(expected) and got == expected, (got, expected)


SQUARE = [str(n) for n in range(3, 103)]


@pytest.mark.parametrize(
    "text, why",
    [
        ("X = 2 ** 10 ** 10", "2 ** 10000000000 is past ±2**64"),
        ("X = 10 ** 100000", "10 ** 100000 is past ±2**64"),
        ("X = 3 ** 41", "its value is an int past ±2**64"),
        ("X = 2.0 ** 10 ** 10", "Python raises OverflowError computing it: (34, 'Numerical result out of range')"),
        ("X = 1 << 10 ** 10", "it holds a LShift; it may use numbers, constants above it that are numbers, math's "
         "pi, e, tau, inf, log, log2, sqrt, exp, float('inf') and + - * / // % ** and a sign"),
        ("X = 99999999999999999999999 + 1", "a literal is an int past ±2**64"),
        ("X = 1 / (A - 7)", "Python raises ZeroDivisionError computing it: division by zero"),
        ("X = math.log(A - 7)", "Python raises ValueError computing it: math domain error"),
        ("X = math.exp(1000)", "Python raises OverflowError computing it: math range error"),
        ("X = (-8.0) ** 0.5", "its value is a complex, not an int or float"),
        ("X = 'ab' * 10 ** 8", "a literal is a str, not an int or float"),
        ("X = (True + 1) * 2", "a literal is a bool, not an int or float"),
        ("X = float('" + "9" * 40 + "')", "float() of a string of more than 32 characters"),
        ("X = tl.program_id(0) * 2", "it calls tl.program_id; it may call math.log, log2, sqrt, exp and float"),
        ("X = 7 % I", "Python raises TypeError computing it: a number % a tl.constexpr (it has no __rmod__)"),
        ("X = math.log(C * 2)", "Python raises TypeError computing it: math.log of a tl.constexpr holding a float"),
        ("X = float(-C)", "Python raises TypeError computing it: float() of a tl.constexpr holding a float"),
        ("X = Y * 2\nY = 2", "Y is not a number defined above it"),  # only constants above it
        ("X = GRADING * 2", "GRADING is not a number defined above it"),
        ("X = math.nan * 1", "math.nan is not a number it may use"),
        ("float = 2\nX = float('inf')", "it calls float"),  # (line 9)
        ("X = tl.constexpr(1, 2) + 1", "it calls tl.constexpr"),
        ("X = tl.constexpr(1, 2)", "tl.constexpr() takes one value"),
        ("X = (1 if A else 2) * 2", "it holds a IfExp"),
        ("X = {[1]: 2}", "it holds a Dict"),  # (ast.literal_eval raised TypeError: a traceback)
        ("X = " + " + ".join(SQUARE), "its expression holds more than 100 nodes"),
    ],
)  # fmt: skip
def test_a_hostile_constant_is_refused_in_one_line_naming_it(text, why):
    with pytest.raises(InputError) as refused:
        allowlist.check(HEADER + text + "\n")
    said = str(refused.value)
    refused_at = REFUSED.replace("line 8", "line 9") if text.startswith("float") else REFUSED
    assert said.startswith(refused_at + why) and "\n" not in said, said


@pytest.mark.parametrize("terms", [3_000, 1_000_000])
def test_a_constant_nested_past_python_s_parser_is_refused_quickly(terms):
    start = time.process_time()
    for text in ("X = " + "-" * terms + "1", "X = " + "1 + " * terms + "1", "X = " + "2 ** " * terms + "2"):
        with pytest.raises(InputError, match=r"^kernel file line \?: nested too deeply for Python's parser$"):
            allowlist.check(HEADER + text + "\n")
    assert time.process_time() - start < 10


def _operation(parts: tuple) -> str:
    """(a op b), (op a) or f(a)."""
    if len(parts) == 3:
        return f"({parts[0]} {parts[1]} {parts[2]})"
    return f"{parts[0]}({parts[1]})" if parts[0][-1].isalpha() else f"({parts[0]}{parts[1]})"


LEAVES = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(
        ["A", "C", "I", "B", "math.pi", "math.inf", 'float("-inf")', "True", "'s'", "1j", "tl.program_id(0)"]
    ),
)
EXPRESSIONS = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "<<", "&"]), inner).map(_operation),
        st.tuples(
            st.sampled_from(["-", "+", "~", "not ", "math.log", "math.exp", "math.sqrt", "float", "abs"]), inner
        ).map(_operation),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
@example("(2 ** (10 ** 10))")
@example("((-(2 ** 64)) // (-1))")
@example("(((2 ** 64) * (2 ** 64)) - ((2 ** 64) * (2 ** 64)))")
@example("(0 ** (-1))")
@example("math.log(((-1) ** 0.5))")
def test_a_constant_is_taken_at_the_value_python_computes_or_refused_in_one_line(expression):
    """Taken: Python computes the same number (`eval`, run only on what was taken), a tl.constexpr where `arithmetic`
    says so; refused: one line, naming line 8."""
    tl = pytest.importorskip("triton.language")
    try:
        allowlist.check(HEADER + f"X = {expression}\n")
    except InputError as e:
        assert str(e).startswith(REFUSED) and "\n" not in str(e), str(e)
        return
    names = {"__builtins__": {"float": float}, "math": math, "A": 7, "C": tl.constexpr(0.5), "I": tl.constexpr(3)}
    expected = eval(expression, names)
    try:
        ast.literal_eval(expression)
        return  # a literal, taken as ever (a number past ±2**64 too: it goes into no arithmetic)
    except ValueError:
        got = value(f"X = {expression}")
    assert got.constexpr == isinstance(expected, tl.constexpr), (got, expected)
    expected = expected.value if got.constexpr else expected
    assert type(got.value) is type(expected) and repr(got.value) == repr(expected), (got, expected)


def test_a_constant_made_by_arithmetic_is_a_compile_time_step_as_a_literal_one_is():
    """constness: a module constant, arithmetic or not, is a constexpr where the `for` stands (a tl.constexpr global:
    a GPU counts it down), unless a local of the kernel shadows it."""
    pytest.importorskip("triton")
    from sim.grading.triton import loops  # (it imports Triton's interpreter)

    kernel = "@triton.jit\ndef k(X, n, B: tl.constexpr):\n    for i in range(n, -1, DOWN * B):\n        pass\n"
    source = HEADER + "DOWN = tl.constexpr(1 - 2 * A // A)\n" + kernel
    assert allowlist.check(source) == set()
    assert loops.sites(source, "k") == {11: False}
    shadowed = source.replace("    for i", "    DOWN = n\n    for i")
    assert loops.sites(shadowed, "k") == {12: True}
