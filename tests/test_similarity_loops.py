"""The similarity report against loops written another way (red team 103): a loop as a function recursing on its
index, a loop unrolled by two, a master spread over a class's methods, counters and generators for `range` — each
a copy of its original (≥ THRESHOLD); independent solutions so rewritten stay apart, and hostile files stay quick."""

import ast
import copy
import textwrap
import time
from pathlib import Path

import pytest

from sim.grading import code_reading, normal_form, similarity

SUBMISSIONS = Path(__file__).parent / "grading_submissions" / "02"
SOURCE = (SUBMISSIONS / "algorithm1.py").read_text()
OTHER = (SUBMISSIONS / "fa2_loop_order.py").read_text()  # FlashAttention-2's loop order: an independent solution


def _spliced(source: str, rewrite) -> str:
    """`source` with each statement `s` of every body as the statements `rewrite(s)` gives (inner bodies first)."""
    tree = ast.parse(source)
    for node in reversed(list(ast.walk(tree))):
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                setattr(node, field, [t for s in body for t in rewrite(s)])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _counted_loop(s: ast.stmt) -> bool:
    return isinstance(s, ast.For) and isinstance(s.iter, ast.Call) and len(s.iter.args) == 1
    # (every loop of the two files is a `range`)


def _at(body: list[ast.stmt], variable: str, value: str) -> list[ast.stmt]:
    """`body` with `value` for each read of `variable`."""

    class Put(ast.NodeTransformer):
        def visit_Name(self, node):
            return (
                ast.parse(value, mode="eval").body if node.id == variable and isinstance(node.ctx, ast.Load) else node
            )

    return [Put().visit(copy.deepcopy(s)) for s in body]


def recursive(source: str) -> str:
    """Each `for x in range(n):` as `def _loop(x): if x >= n: return; …; _loop(x + 1)`, then `_loop(0)`."""
    names = iter(range(100))

    def rewrite(s: ast.stmt) -> list[ast.stmt]:
        if not _counted_loop(s):
            return [s]
        name, x, n = f"_loop{next(names)}", s.target.id, ast.unparse(s.iter.args[0])
        fn, call = ast.parse(
            f"def {name}({x}):\n    if {x} >= {n}:\n        return\n    {name}({x} + 1)\n{name}(0)"
        ).body
        fn.body[1:1] = s.body
        return [fn, call]

    return _spliced(source, rewrite)


def unrolled(source: str) -> str:
    """Each innermost `for x in range(n): B` as `for x in range(0, n - 1, 2): B; B(x + 1)`, then `if n % 2: B(n - 1)`."""

    def rewrite(s: ast.stmt) -> list[ast.stmt]:
        if not _counted_loop(s) or any(isinstance(t, ast.For) for t in s.body):
            return [s]
        x, n = s.target.id, f"({ast.unparse(s.iter.args[0])})"
        last = ast.If(ast.parse(f"{n} % 2", mode="eval").body, _at(s.body, x, f"{n} - 1"), [])
        s.body = s.body + _at(s.body, x, f"{x} + 1")
        s.iter.args = [ast.Constant(0), ast.parse(f"{n} - 1", mode="eval").body, ast.Constant(2)]
        return [s, last]

    return _spliced(source, rewrite)


def in_a_class(source: str) -> str:
    """The entry as a class's `run`, its shapes found by `__init__`, its row blocks by a method called twice, `chip`
    as `self.chip`, the class constructed and its method called in one statement."""
    head, body = source.split("def forward(chip, *, Br, Bc, scale):\n")
    body = "    chip.hbm.alloc(" + body.split("    chip.hbm.alloc(", 1)[1].replace(
        "rows = (i * Br, min((i + 1) * Br, N))", "rows = self.rows(i)"
    )
    return (
        head
        + textwrap.dedent("""\
        class Attention:
            def __init__(self, chip, Br, Bc, scale):
                self.chip, self.Br, self.Bc, self.scale = chip, Br, Bc, scale
                self.N, self.d = chip.hbm.tensors["Q"].shape
                self.Nk = chip.hbm.tensors["K"].shape[0]

            def rows(self, i):
                return (i * self.Br, min((i + 1) * self.Br, self.N))

            def run(self):
                chip, Br, Bc, scale, N, d, Nk = self.chip, self.Br, self.Bc, self.scale, self.N, self.d, self.Nk
        """)
        + textwrap.indent(body, "    ")
        + ("\n\ndef forward(chip, *, Br, Bc, scale):\n    return Attention(chip, Br, Bc, scale).run()\n")
    )


def counted(source: str) -> str:
    """The blocks of the first two loops from generators in their headers, the third loop a `while` over a counter."""
    source = source.replace(
        "for i in range(-(-N // Br)):\n        rows = (i * Br, min((i + 1) * Br, N))\n        r =",
        "for rows in ((i * Br, min((i + 1) * Br, N)) for i in range(-(-N // Br))):\n        r =",
    )
    source = source.replace(
        "    for j in range(-(-Nk // Bc)):\n        cols = (j * Bc, min((j + 1) * Bc, Nk))\n",
        "    for cols in ((j * Bc, min((j + 1) * Bc, Nk)) for j in range(-(-Nk // Bc))):\n",
    )
    source = source.replace("        for i in range(-(-N // Br)):\n", "        i = 0\n        while i < -(-N // Br):\n")
    last = '            chip.free("Q_i", "O_i", "ℓ_i", "m_i", "m_new", "P", "α", "ℓ_new")\n'
    return source.replace(last, last + "            i += 1\n")


def score(a: str, b: str) -> float:
    return similarity.score(similarity.fingerprint(a), similarity.fingerprint(b))


@pytest.mark.parametrize("rewrite", [recursive, unrolled, in_a_class, counted])
def test_a_loop_rewritten_is_a_copy_and_an_independent_solution_rewritten_stays_apart(rewrite):
    """Red team 103, against the master: a loop as tail recursion 0.52, unrolled by two 0.76, a class (constructed,
    then its method called) 0.72, a counter and a generator with others 0.73 (here 0.47, 0.73, 0.72, 0.76 before)."""
    other = rewrite(SOURCE)
    compile(other, "other.py", "exec")
    assert other != SOURCE and score(other, SOURCE) >= similarity.THRESHOLD
    apart = score(SOURCE, OTHER)
    assert apart < similarity.THRESHOLD and score(rewrite(OTHER), SOURCE) < similarity.THRESHOLD


def test_each_loop_rewrite_is_its_loop():
    loop = "def f(chip, n):\n    for i in range(n):\n        chip.store(chip.load(i), i)\n"
    recursion = ("def f(chip, n):\n    def g(i):\n        if i < n:\n            chip.store(chip.load(i), i)\n"
                 "            g(i + 1)\n    g(0)\n")  # fmt: skip
    counter = "def f(chip, n):\n    i = 0\n    while i < n:\n        chip.store(chip.load(i), i)\n        i += 1\n"
    generator = "def f(chip, n):\n    for a in (chip.load(i) for i in range(n)):\n        chip.store(a, i)\n"
    twice = ("def f(chip, n):\n    for i in range(0, n, 2):\n        chip.store(chip.load(i), i)\n"
             "        chip.store(chip.load(i + 1), i + 1)\n")  # fmt: skip
    form = normal_form.normalized(loop)
    assert form == "def f(chip, n):\n    i = range(n)\n    chip.store(chip.load(i), i)"
    assert all(normal_form.normalized(s) == form for s in (recursion, counter, generator)), form
    assert normal_form.normalized(twice) == form


@pytest.mark.parametrize(
    "kept, mark",
    [  # each is not its loop: left as written
        ("def g(i):\n    if i >= n:\n        return\n    f(i)\n    i = 2\n    g(i + 1)\n", "g(1 + i)"),  # i assigned
        ("def g(i, a):\n    if i >= n:\n        return\n    f(i)\n    g(i + 1, a + 1)\n", "g(1 + i, 1 + a)"),  # a too
        ("i = 0\nwhile i < n:\n    i += 1\n    f(i)\n", "i += 1"),  # the counter read after its increment
        ("i = 0\nwhile i < n:\n    f(i)\n    i += 1\nprint(i)\n", "i += 1"),  # and after the loop
        ("for i in range(0, n, 2):\n    f(i)\n    g(i + 1)\n", "range(0, n, 2)"),  # two different bodies
    ],
)
def test_what_is_not_a_loop_written_another_way_stays(kept, mark):
    assert mark in normal_form.normalized(kept)


COUNTERS = "".join(f"x{k} = 0\nwhile x{k} < n:\n    f(x{k})\n    x{k} += 1\n" for k in range(2500))
UNROLLED = (
    "for i in range(0, n, 2):\n"
    + "    f(i)\n" * 5000
    + "    f(i + 1)\n" * 5000
    + "if n % 2:\n"
    + "    f(n - 1)\n" * 5000
)
RECURSIONS = "".join(
    f"def g{k}(i):\n    if i >= n:\n        return\n    f(i)\n    g{k}(i + 1)\ng{k}(0)\n" for k in range(2000)
)
CALLED = "def b(i):\n    return (i * B, min((i + 1) * B, N))\n" + "f(b(i))\n" * 10_000  # 10⁴ copies: too many, kept


CHAIN = (
    "".join(f"def f{k}(x):\n    a = g(x)\n    f{k + 1}(h(a))\n" for k in range(3300))
    + "def f3300(x):\n    g(x)\nf0(1)\n"
)
# (helpers each calling the next, each called once: each put back copied its callee's again; 400 took 22 s)


@pytest.mark.parametrize("hostile", [COUNTERS, UNROLLED, RECURSIONS, CALLED, CHAIN])
def test_ten_thousand_statements_of_each_rewrite_are_read_in_time(hostile):
    started = time.monotonic()
    form = normal_form.normalized(hostile)
    assert time.monotonic() - started < code_reading.READ_S and len(form) < len(hostile)  # (10⁴ plain lines: 3 s)
