"""A module constant made by arithmetic, its value computed by walking its syntax tree, never by running it.

Honest kernels write `RCP_LN2 = tl.constexpr(1.0 / 0.6931471805599453)`, `BLOCK = 2 * 64`,
`NEG = -float("inf")`, `SCALE = 1 / math.log(2)` (helper 110). Python computes such a value when
it loads the file (the compile check's process, then the submission's), so a value is taken only
where that is quick and small: numbers (not bools, strings or complex), earlier constants that are
numbers, math's pi, e, tau, inf and its log, log2, sqrt, exp, float() of a short string; + - * / //
% ** and a sign; at most NODES nodes; every int within ±2⁶⁴ (an int ** int past it refused before
it is computed: 2 ** 10 ** 10); and whatever Python would raise (1 / 0, math.log(0), an overflow)
refused like the rest. A value made of a `tl.constexpr` is one too (its arithmetic returns one), and
Python refuses two things of it: a number % it (it has no __rmod__) and float() or math's of it
holding a float (it has no __float__, and its __index__ returns the float).
"""

import ast
import math
import operator
from typing import NamedTuple

from sim.grading.triton.vocabulary import chain

NODES = 100  # an honest constant holds a dozen
LIMIT = 2**64  # a constexpr int is at most 64 bits
FLOAT_TEXT = 32  # characters of float()'s string: "-inf", "1e-30"
VALUES = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}
FUNCTIONS = {"log": (math.log, 2), "log2": (math.log2, 1), "sqrt": (math.sqrt, 1), "exp": (math.exp, 1)}
OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
SIGNS = {ast.USub: operator.neg, ast.UAdd: operator.pos}
OFFERED = "numbers, constants above it that are numbers, math's pi, e, tau, inf, log, log2, sqrt, exp, float('inf')"


class Unfit(ValueError):
    """Why a constant's expression is not one whose value is taken."""


class Number(NamedTuple):
    """A constant's value, and whether Python holds it as a tl.constexpr."""

    value: int | float
    constexpr: bool = False


def value(node: ast.expr, numbers: dict[str, Number], aliases: dict[str, str], bound: set[str]) -> Number:
    """The value of `node`, arithmetic of `OFFERED` (`numbers`: the constants above it that are numbers; `aliases`:
    the imports above it; `bound`: every name bound above it, where `float` must not be), or Unfit saying why not."""
    if sum(1 for _ in zip(range(NODES + 1), ast.walk(node), strict=False)) > NODES:
        raise Unfit(f"its expression holds more than {NODES} nodes")
    return _value(node, numbers, {a for a, m in aliases.items() if m == "math"}, "float" in bound)


def _value(node: ast.expr, numbers: dict[str, Number], maths: set[str], shadowed: bool) -> Number:
    if isinstance(node, ast.Constant):
        return Number(_fit(node.value, "a literal"))
    if isinstance(node, ast.Name):
        if node.id not in numbers:
            raise Unfit(f"{node.id} is not a number defined above it; it may use {OFFERED}")
        return Number(_fit(numbers[node.id].value, node.id), numbers[node.id].constexpr)
    if isinstance(node, ast.Attribute):
        names = chain(node).split(".")
        if len(names) != 2 or names[0] not in maths or names[1] not in VALUES:
            raise Unfit(f"{chain(node) or '.' + node.attr} is not a number it may use; it may use {OFFERED}")
        return Number(VALUES[names[1]])
    if isinstance(node, ast.UnaryOp) and type(node.op) in SIGNS:
        operand = _value(node.operand, numbers, maths, shadowed)
        return Number(_fit(SIGNS[type(node.op)](operand.value), "its value"), operand.constexpr)
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = (_value(n, numbers, maths, shadowed) for n in (node.left, node.right))
        a, b = left.value, right.value
        if isinstance(node.op, ast.Pow) and type(a) is type(b) is int and abs(a) > 1 and b > 64:
            raise Unfit(f"{a} ** {b} is past ±2**64")
        if isinstance(node.op, ast.Mod) and right.constexpr and not left.constexpr:
            raise Unfit("Python raises TypeError computing it: a number % a tl.constexpr (it has no __rmod__)")
        number = _fit(_computed(OPERATORS[type(node.op)], a, b), "its value")
        return Number(number, left.constexpr or right.constexpr)
    if isinstance(node, ast.Call):
        return Number(_call(node, numbers, maths, shadowed))
    what = type(node.op).__name__ if isinstance(node, ast.BinOp | ast.UnaryOp) else type(node).__name__
    raise Unfit(f"it holds a {what}; it may use {OFFERED} and + - * / // % ** and a sign")


def _call(node: ast.Call, numbers: dict[str, Number], maths: set[str], shadowed: bool) -> int | float:
    """math.log/log2/sqrt/exp of numbers, or the builtin float() of a short string or a number."""
    names = chain(node.func).split(".")
    if node.keywords:
        raise Unfit("a call with a keyword")
    if names == ["float"] and not shadowed and len(node.args) == 1:
        (arg,) = node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if len(arg.value) > FLOAT_TEXT:
                raise Unfit(f"float() of a string of more than {FLOAT_TEXT} characters")
            return _computed(float, arg.value)
        return _computed(float, *_plain("float()", [arg], numbers, maths, shadowed))
    if len(names) == 2 and names[0] in maths and names[1] in FUNCTIONS:
        function, most = FUNCTIONS[names[1]]
        if not 1 <= len(node.args) <= most:
            raise Unfit(f"math.{names[1]} of {len(node.args)} numbers")
        return _fit(_computed(function, *_plain(f"math.{names[1]}", node.args, numbers, maths, shadowed)), "its value")
    raise Unfit(f"it calls {chain(node.func) or 'an expression'}; it may call math.log, log2, sqrt, exp and float")


def _plain(what: str, args: list[ast.expr], numbers: dict[str, Number], maths: set[str], shadowed: bool) -> list:
    """The numbers `args` hold, as a call converting them to a float takes them, or Unfit where Python would not."""
    found = [_value(a, numbers, maths, shadowed) for a in args]
    if any(n.constexpr and type(n.value) is float for n in found):
        raise Unfit(f"Python raises TypeError computing it: {what} of a tl.constexpr holding a float (it has no "
                    "__float__); write the number itself")  # fmt: skip
    return [n.value for n in found]


def _computed(function, *args) -> int | float:
    """`function(*args)`, or Unfit with what Python would raise."""
    try:
        return function(*args)
    except (ArithmeticError, ValueError) as e:
        raise Unfit(f"Python raises {type(e).__name__} computing it: {' '.join(str(e).split())[:100]}") from None


def _fit(number, what: str) -> int | float:
    """`number` if it is an int within ±LIMIT or a float, else Unfit."""
    if type(number) is int and abs(number) > LIMIT:
        raise Unfit(f"{what} is an int past ±2**64")
    if type(number) not in (int, float):
        raise Unfit(f"{what} is a {type(number).__name__}, not an int or float")
    return number
