"""The similarity report: renamed, recommented and reformatted copies are flagged with both names and the score;
independent solutions and untouched handouts are not; nothing is taken off a score."""

import ast
import builtins
import csv
import io
import keyword
import re
import tokenize
import unicodedata
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sim.core.errors import InputError
from sim.grading import code_reading, grader, normal_form, similarity, spec
from sim.grading.export import student_text
from sim.grading.report import SubmissionReport
from tests.cli_runner import flashsim

SUBMISSIONS = Path(__file__).parent / "grading_submissions" / "02"
MASTER = spec.load(spec.locate("02"))
LISTING = Path(similarity.__file__).resolve().parents[1] / "algorithms" / "flash1.py"


def disguised(source: str) -> str:
    """The same program with every local name renamed (not the modules and names it imports: they would not import),
    comments and docstrings' words changed, lines spread out."""
    names: dict[str, str] = {}
    out = []
    previous = None
    merged: list[tokenize.TokenInfo] = []  # m̃_ij is one name, which the tokenizer splits at its combining mark
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        mark = t.type == tokenize.ERRORTOKEN and unicodedata.category(t.string[0])[0] == "M"
        after_mark = (
            t.type == tokenize.NAME and merged and unicodedata.category(merged[-1].string[-1:] or "a")[0] == "M"
        )
        if merged and merged[-1].type == tokenize.NAME and (mark or after_mark):
            merged[-1] = merged[-1]._replace(string=merged[-1].string + t.string)
            continue
        merged.append(t)
    imported = {a.name.split(".")[0] if isinstance(node, ast.Import) else a.name
                for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import | ast.ImportFrom)
                for a in node.names if a.asname is None}  # fmt: skip
    importing = False  # in an import statement, only a name after `as` is the file's own
    for t in merged:
        text = t.string
        importing = text in ("import", "from") or (importing and t.type != tokenize.NEWLINE)
        if (
            t.type == tokenize.NAME
            and not keyword.iskeyword(text)
            and previous != "."
            and text not in dir(builtins)  # (`__builtins__` is a dict in an imported module)
            and text not in imported
            and (not importing or previous == "as")
        ):
            text = names.setdefault(text, f"renamed_{len(names)}")
        elif t.type == tokenize.COMMENT:
            text = "# reworded"
        out.append((t.type, text))
        previous = t.string
    return tokenize.untokenize(out).replace("\n", "\n\n")


def report(paths):
    return similarity.report(MASTER.path, MASTER.grading, student_text(MASTER.path.read_text()), paths)


def test_renaming_recommenting_and_reformatting_leave_the_tokens_alone():
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    assert similarity.tokens(disguised(source)) == similarity.tokens(source)
    assert similarity.tokens('def f(a):\n    """Doc."""\n    return a.load(1, "x")  # c\n') == [
        "def", "v", "(", "v", ")", ":", "return", "v", ".", "load", "(", "0", ",", "s", ")",
    ]  # fmt: skip


def test_a_disguised_copy_of_another_submission_is_flagged_with_both_names(tmp_path):
    alice, bob = tmp_path / "alice.py", tmp_path / "bob.py"
    alice.write_text((SUBMISSIONS / "algorithm1.py").read_text())
    bob.write_text(disguised(alice.read_text()))
    flags = report([alice, bob])
    assert [(f.a, f.b) for f in flags] == [("alice.py", "bob.py")] and flags[0].score == 1.0
    assert flags[0].line() == "similar to bob.py: 1.00 of its code in common (for review; no points taken)"


def test_independent_solutions_and_untouched_handouts_are_not_flagged(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text((SUBMISSIONS / "algorithm1.py").read_text())  # Algorithm 1's loop order
    b.write_text((SUBMISSIONS / "fa2_loop_order.py").read_text())  # FlashAttention-2's: a different program
    assert report([a, b]) == []
    handout = student_text(MASTER.path.read_text())
    a.write_text(handout)
    b.write_text(handout)
    assert report([a, b]) == []  # the handout is every student's start: it is not counted


def test_a_copy_of_the_listing_or_of_the_master_is_flagged_against_it(tmp_path):
    listing, master = tmp_path / "listing.py", tmp_path / "master.py"
    listing.write_text(disguised(LISTING.read_text()))
    master.write_text(disguised(MASTER.path.read_text()))
    flags = {(f.a, f.b): f.score for f in report([listing, master])}
    assert flags[("listing.py", "the library's listing sim/algorithms/flash1.py")] == 1.0
    assert flags[("master.py", "the instructor's master 02_flash1_forward.py")] == 1.0


def test_scores_by_hand():
    a, b = frozenset(range(100)), frozenset(range(50, 250))
    assert similarity.score(a, b) == 0.25  # 50 runs in common, of the larger's 200
    assert similarity.contained(a, b) == 0.5  # 50 of the smaller's 100 runs: how a file is held to a reference
    assert similarity.score(frozenset(range(10)), frozenset(range(10))) == 0.0  # too little code to judge


def test_a_file_pasting_classmates_code_into_its_own_is_noted_without_accusing_them(tmp_path):
    # before: the score was the share of the smaller file found in the other, so every honest classmate whose code a
    # superset pasted in scored 1.00 against it and was flagged "similar" (red team H2); then only the larger file was
    # noted, so a copy trimmed under THRESHOLD left the original alone holding the note (red team 84): each is noted
    # now, the smaller as found in the larger
    paths = {name: tmp_path / name for name in ("alice.py", "bob.py", "carol.py", "mallory.py")}
    paths["alice.py"].write_text((SUBMISSIONS / "algorithm1.py").read_text())
    paths["bob.py"].write_text(disguised(paths["alice.py"].read_text()))  # a real copy
    paths["carol.py"].write_text((SUBMISSIONS / "fa2_loop_order.py").read_text())
    paths["mallory.py"].write_text(paths["alice.py"].read_text() + "\n" + paths["carol.py"].read_text())
    flags = {(f.a, f.b): (round(f.score, 2), f.holds) for f in report(list(paths.values())) if f.b in paths}
    assert flags == {  # (between submissions: two solutions pasted together may hold much of the master too)
        ("alice.py", "bob.py"): (1.0, False),
        ("mallory.py", "alice.py"): (1.0, True),
        ("mallory.py", "bob.py"): (1.0, True),
        ("mallory.py", "carol.py"): (1.0, True),
    }
    reports = grader.grade(MASTER.public(), list(paths.values()), seed=1, jobs=2)
    notes = {r.submission: r.notes for r in reports}
    found = "1.00 of its code is in mallory.py, a larger file (for review; no points taken)"
    assert notes["carol.py"] == [found] and found in notes["alice.py"] and found in notes["bob.py"]
    assert not any("similar to mallory" in n for n in notes["alice.py"] + notes["bob.py"] + notes["carol.py"])
    assert notes["mallory.py"][0] == "holds 1.00 of the code of alice.py (for review; no points taken)"


@given(st.text(max_size=300))
@example("\r\x80")  # Python 3.12's tokenizer raised UnicodeDecodeError on it (the H200's run 53)
def test_any_text_tokenizes_without_raising(text):
    assert isinstance(similarity.fingerprint(text), frozenset)


def test_a_graded_batch_carries_the_flags_and_keeps_its_scores(tmp_path):
    alice, bob = tmp_path / "alice.py", tmp_path / "bob.py"
    alice.write_text((SUBMISSIONS / "algorithm1.py").read_text())
    bob.write_text(disguised(alice.read_text()))
    reports = grader.grade(MASTER.public(), [alice, bob], seed=1, jobs=2)
    alone = grader.grade(MASTER.public(), [alice], seed=1, jobs=1)[0]
    assert reports[0].notes == ["similar to bob.py: 1.00 of its code in common (for review; no points taken)"]
    assert reports[1].notes == ["similar to alice.py: 1.00 of its code in common (for review; no points taken)"]
    assert reports[0].score == alone.score > 0 and not reports[0].flags and alone.notes == []


def test_a_copy_saved_in_another_encoding_is_flagged_as_python_reads_it(tmp_path):
    """Python runs a file in the encoding its coding line names: a copy saved in GB 18030 (which holds ℓ and α
    too) runs the same and was read as no code at all (it is not UTF-8), so it evaded the report."""
    alice = tmp_path / "alice.py"
    alice.write_text((SUBMISSIONS / "algorithm1.py").read_text())
    copies = {
        "gb.py": ("# -*- coding: gb18030 -*-\n# café\n" + alice.read_text()).encode("gb18030"),
        "bom.py": b"\xef\xbb\xbf" + alice.read_bytes(),
    }
    for name, data in copies.items():
        (tmp_path / name).write_bytes(data)
        compile(data, name, "exec")  # Python reads it
    flags = {(f.a, f.b) for f in report([alice, *(tmp_path / n for n in copies)])}
    assert {("alice.py", "bom.py"), ("alice.py", "gb.py")} <= flags, flags


def test_a_misspelt_marker_in_the_master_is_refused_before_any_submission_runs(tmp_path):
    # before: the batch was graded, then the similarity report's student copy of the master raised on the marker
    # and every grade of the batch was lost (red team C1)
    lines = MASTER.path.read_text(encoding="utf-8").splitlines()
    number = next(n for n, line in enumerate(lines) if line.lstrip().startswith("# BEGIN SOLUTION"))
    lines[number] = "    # BEGIN SOLUTION "  # a trailing space
    master = tmp_path / MASTER.path.name
    master.write_text("\n".join(lines) + "\n", encoding="utf-8")
    alice, bob = tmp_path / "alice.py", tmp_path / "bob.py"
    alice.write_text((SUBMISSIONS / "algorithm1.py").read_text())
    bob.write_text((SUBMISSIONS / "fa2_loop_order.py").read_text())
    graded = []
    message = f"^02_flash1_forward.py line {number + 1}: '# BEGIN SOLUTION ' looks like a marker but is not one"
    with pytest.raises(InputError, match=message):
        grader.grade(spec.load(master).public(), [alice, bob], seed=1, progress=graded.append)
    assert graded == []


def test_a_similarity_report_that_cannot_be_made_costs_its_flags_not_the_grades(tmp_path):
    # before: the similarity step's exception ended the command after the batch was graded: no grades, no CSV
    lines = MASTER.path.read_text(encoding="utf-8").splitlines()
    begin = lines.index("    # BEGIN HIDDEN TESTS")
    end = lines.index("    # END HIDDEN TESTS")
    kept = [*lines[:begin], *lines[begin + 1 : begin + 3], *lines[end + 1 :]]  # one hidden test, outside the markers
    master, folder = tmp_path / MASTER.path.name, tmp_path / "submissions"
    master.write_text("\n".join(kept) + "\n", encoding="utf-8")
    folder.mkdir()
    for name in ("alice.py", "bob.py"):
        (folder / name).write_text((SUBMISSIONS / "algorithm1.py").read_text())
    flashsim("grade", master, folder, "--seed", "1", "--csv", tmp_path / "grades.csv")
    rows = list(csv.DictReader((tmp_path / "grades.csv").open(encoding="utf-8")))
    why = (
        "similarity not judged: the similarity report could not be made (InputError: 02_flash1_forward.py line "
        f"{begin + 1}: test 'N ≠ Nk, bf16' is 'hidden' and outside # BEGIN HIDDEN TESTS … # END HIDDEN TESTS)"
    )
    assert [(r["submission"], r["score"], r["max_score"], r["notes"]) for r in rows] == [
        ("alice.py", "50", "50", why),
        ("bob.py", "50", "50", why),
    ]  # the master's solution: full marks on its four tests


def joined_and_padded(source: str) -> str:
    """The same program written another way: each run of simple statements joined by '; ', each followed by a
    `pass`, a lone `0` and a lone name `_`, and its tuples in parentheses (ast.unparse's) — red team 84 scored
    0.53–0.57 (`;`, `pass`), red team 85 0.61 (a lone name after every statement)."""
    lines, out = ast.unparse(ast.parse(source)).splitlines(), []
    for line in filter(str.strip, lines):
        indent = line[: len(line) - len(line.lstrip())]
        simple = not line.rstrip().endswith(":") and not line.lstrip().startswith(("@", "#"))
        if simple and out and out[-1][1] == indent:
            out[-1] = (out[-1][0] + "; " + line.strip() + "; pass; 0; _", indent)
        else:
            out.append((line + ("; pass" if simple else ""), indent if simple else None))
    return "\n".join(text for text, _ in out) + "\n"


def assert_one_program(tmp_path, source: str, other: str) -> None:
    """`other`, a rewrite of `source` that compiles, has its fingerprint and is flagged against it at 1.00."""
    compile(other, "other.py", "exec")
    assert similarity.fingerprint(other) == similarity.fingerprint(source)
    alice, bob = tmp_path / "alice.py", tmp_path / "bob.py"
    alice.write_text(source)
    bob.write_text(other)
    assert [(f.a, f.b, round(f.score, 2)) for f in report([alice, bob])] == [("alice.py", "bob.py", 1.0)]


def test_joining_lines_and_padding_with_statements_that_do_nothing_leave_the_runs_alone(tmp_path):
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = joined_and_padded(source)
    assert ";" in other and "pass" in other and other.count("\n") < source.count("\n") / 2
    assert_one_program(tmp_path, source, other)


def test_a_file_that_takes_too_long_to_read_is_not_judged_and_the_rest_are(tmp_path, monkeypatch):
    """Red team 84: the report parsed each file in the grader's own process, where a 1 MiB f-string held the GIL
    for 111 s (every grading thread stalled); red team 88: it decoded each file there too, and a `# coding:
    punycode` file of 1 MiB took 479 s (the codec is quadratic). A child decodes and reads them now, each under
    READ_S."""
    monkeypatch.setattr(code_reading, "READ_S", 0.3)
    monkeypatch.setattr(similarity, "builds_code", lambda source: pytest.fail("parsed in the grader's process"))
    monkeypatch.setattr(similarity, "source_text", lambda data: pytest.fail("decoded in the grader's process"))
    slow, puny = tmp_path / "a_slow.py", tmp_path / "b_punycode.py"
    alice, bob = tmp_path / "alice.py", tmp_path / "bob.py"
    slow.write_text("x = f'" + "{1}" * 40_000 + "'\n")  # (1 MiB of it: 111 s to parse in Python 3.11)
    puny.write_bytes(b"# coding: punycode\n-" + ("\U0001f600" * 150_000).encode("punycode"))  # 1.4 s to decode
    alice.write_text((SUBMISSIONS / "algorithm1.py").read_text())
    bob.write_text(disguised(alice.read_text()))
    files = (slow, puny, alice, bob)
    read = code_reading.read_all({p.name: p.read_bytes() for p in files})
    assert read["a_slow.py"].unread == read["b_punycode.py"].unread == "took more than 0.3 s to read"
    assert read["alice.py"].unread == read["bob.py"].unread == ""
    assert read["alice.py"].runs == read["bob.py"].runs == frozenset(similarity.runs(alice.read_text()))
    reports = [SubmissionReport(p.name, MASTER.name, 1) for p in files]
    similarity.annotate(MASTER, list(files), reports)
    assert reports[0].notes == reports[1].notes == ["similarity not judged: its code took more than 0.3 s to read"]
    assert reports[2].notes == ["similar to bob.py: 1.00 of its code in common (for review; no points taken)"]


def test_a_file_that_ends_the_process_reading_it_is_said_to_and_the_rest_are_read(tmp_path, monkeypatch):
    """Session 25's leftover: a file that made the reading process run out of memory was said to have "took more
    than 10 s to read" (it took 0.4)."""
    monkeypatch.setattr(code_reading, "MEMORY", 300 << 20)  # Python and the project's modules take about 60 MiB
    big, alice = tmp_path / "a_big.py", tmp_path / "alice.py"
    big.write_text("x = [" + "1," * 3_000_000 + "]\n")  # its syntax tree alone: more than 300 MiB
    alice.write_text((SUBMISSIONS / "algorithm1.py").read_text())
    read = code_reading.read_all({p.name: p.read_bytes() for p in (big, alice)})
    assert read["a_big.py"].unread == "could not be put in its normal form (MemoryError)"
    assert read["alice.py"].unread == "" and read["alice.py"].runs == frozenset(similarity.runs(alice.read_text()))
    monkeypatch.setattr(code_reading, "CHILD", "import os; os._exit(3)")  # a reader that dies, whatever it reads
    read = code_reading.read_all({p.name: p.read_bytes() for p in (big, alice)})
    assert (
        read["a_big.py"].unread
        == read["alice.py"].unread
        == "ended the process that read it (which may hold 300.0 MiB)"
    )


WRAPPERS = (
    ("if True:", ""),
    ("for _ in range(1):", ""),
    ("while 1:", "    break"),
    ("with memoryview(b''):", ""),
    ("try:", "except Exception as e:\n    raise e"),
    ("if not 0:", "else:\n    pass"),
)


PADDING = ("global _g", "_a: int", "assert 1", "import math", "del __", "len(())", "print(_)")  # red teams 86, 88


def wrapped_and_dead(source: str) -> str:
    """The same program written another way: each statement (at any depth) inside a control statement that runs it
    once — each of WRAPPERS in turn — and followed by assignments nothing reads (`_ = 0`, `__ = _ + 1`), by one of
    PADDING and by `x = x`; red team 86's lead (`if True:` around each line scored 0.39 against its original)."""
    turn = iter(range(10**6))

    def rewrite(body: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for s in body:
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(s, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    setattr(s, field, rewrite(inner))
            k = next(turn)
            (head, tail), padding = WRAPPERS[k % len(WRAPPERS)], PADDING[k % len(PADDING)]
            indented = "\n".join("    " + line for line in ast.unparse(s).splitlines())
            out += ast.parse(f"{head}\n{indented}\n{tail}\n_ = 0\n__ = _ + 1\n{padding}").body
            if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
                out += ast.parse(f"{s.targets[0].id} = {s.targets[0].id}").body
        return out

    tree = ast.parse(source)
    tree.body = rewrite(tree.body)
    return ast.unparse(tree) + "\n"


def test_control_statements_around_each_line_and_assignments_nothing_reads_leave_the_runs_alone(tmp_path):
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = wrapped_and_dead(source)
    assert all(head in other for head, _ in WRAPPERS) and all(padding in other for padding in PADDING)
    assert_one_program(tmp_path, source, other)


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    x = f()\nexcept* ValueError:\n    raise\nelse:\n    y = x\nfinally:\n    z = 1\n",
        "match p:\n    case [a, *b] if a:\n        f(b)\n    case _:\n        pass\n",
        "if c:\n    def g():\n        global k\n        k = 1\nelse:\n    class C:\n        t = 2\n",
        "async def h():\n    async with a as b:\n        async for i in b:\n            await i\n",
        "while x := f():\n    del x\n    break\nelse:\n    continue\n",
    ],
)
def test_the_normal_form_of_any_statement_parses_again(source):
    form = normal_form.normalized(source)
    assert isinstance(ast.parse(form), ast.Module) and isinstance(similarity.fingerprint(source), frozenset)


def test_assignments_are_dropped_only_where_nothing_live_reads_them():
    source = "a = 0\nb = a\ng(b)\nc = 1\nd = c + d\nif c:\n    e = f(0)\nx = x\nprint(c)\nlen([d])\n"
    assert normal_form.normalized(source) == "g(0)\ne = f(0)"  # a, b put back; e's call stays; c, d: read by none
    # (print(c) and len([d]) do nothing but read them: red team 88's one read that kept a padding's stores)


@pytest.mark.parametrize(
    "source, found",
    [  # red team 86: exec reached through __builtins__' dict ran a compressed copy, unnamed
        ('__builtins__["exec"](code)', ["__builtins__, line 1", "'exec', line 1"]),
        ('import builtins\nvars(builtins)["ex" + "ec"](code)', ["import builtins, line 1", "vars, line 2"]),
        # red team 88: exec reached through sys.modules, importlib, marshal and a compressed payload
        ('import sys, zlib\nsys.modules["builtins"].exec(zlib.decompress(b))', ["import zlib, line 1", "exec, line 2"]),
        ("import sys\nprint(sys.float_info.eps, file=sys.stderr)", []),  # red team 93: sys alone is not a loader
        ("from importlib import import_module\nimport_module(m).exec(c)", ["import importlib, line 1", "exec, line 2"]),
        ("import marshal as m, numpy as np", ["import marshal, line 1"]),
        ("import numpy as np\nfrom math import sqrt\nmodel.eval()", []),
        ('getattr(x, "ex" + "ec")(code)', ["getattr of a name built at run time, line 1"]),
        ("f = eval\nf(code)", ["eval, line 1"]),
        ("builtins.compile(code, 'f', 'exec')", ["compile, line 1", "'exec', line 1"]),
        ("g = f.__globals__", ["__globals__, line 1"]),
        ("exec('x = 1')\nre.compile(p)\ny = getattr(x, 'shape')", []),  # literals only; another module's compile
    ],
)
def test_each_way_to_code_built_at_run_time_is_named_with_its_line(source, found):
    assert sorted(similarity.builds_code(source)) == sorted(found)


HIDING = ("for {x} in [{e}]:\n    pass", "with {e} as {x}:\n    pass", "if ({x} := {e}):\n    pass", "({x} := {e})",
          "[{x}] = [{e}]")  # fmt: skip


class _Hidden(ast.NodeTransformer):
    """Red team 89's rewrites: `x = e` as each of HIDING in turn, `a.b` as `getattr(a, 'b')`."""

    turn = 0

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load):
            return ast.Call(ast.Name("getattr", ast.Load()), [node.value, ast.Constant(node.attr)], [])
        return node

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return node
        self.turn += 1
        text = HIDING[self.turn % len(HIDING)].format(x=node.targets[0].id, e=ast.unparse(node.value))
        return ast.parse(text).body[0]


def test_assignments_hidden_in_headers_walruses_and_getattr_leave_the_runs_alone(tmp_path):
    """Red team 89: `for x in [e]: pass` for each `x = e` scored 0.00 (headers were dropped whole), `(x := e)` 0.53,
    `[x] = [e]` 0.47, `getattr(a, 'b')` for `a.b` 0.18."""
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = ast.unparse(ast.fix_missing_locations(_Hidden().visit(ast.parse(source)))) + "\n"
    assert all(mark in other for mark in (" in [", "with ", "if (", " := ", "] = [", "getattr(chip, 'load')"))
    assert_one_program(tmp_path, source, other)


class _Swapped(ast.NodeTransformer):
    """Red team 91's rewrite: `a + b` as `b + a`, `a * b` as `b * a`, `a < b` as `b > a`, `a - b` as `a + -b`."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Add | ast.Mult):
            return ast.BinOp(node.right, node.op, node.left)
        if isinstance(node.op, ast.Sub):
            return ast.BinOp(node.left, ast.Add(), ast.UnaryOp(ast.USub(), node.right))
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        swap = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}.get(type(node.ops[0]))
        if len(node.ops) == 1 and swap:
            return ast.Compare(node.comparators[0], [swap()], [node.left])
        return node


def test_operands_swapped_and_subtractions_as_negated_additions_leave_the_runs_alone(tmp_path):
    """Red team 91: the three together kept a copy of the master at 0.75."""
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = ast.unparse(ast.fix_missing_locations(_Swapped().visit(ast.parse(source)))) + "\n"
    assert " + -" in other and other != ast.unparse(ast.parse(source)) + "\n"
    assert_one_program(tmp_path, source, other)


def JUNK() -> ast.stmt:
    return ast.parse("np.float32(0)").body[0]


class _Temporaries(ast.NodeTransformer):
    """Red team 94's rewrites: every call's receiver bound once (`load = chip.load`), every argument that calls
    something held in a temporary first (`KT = K_j.T` …), keyword arguments, `np.max(S, axis=1)` for
    `S.max(axis=1)`, `x.transpose()` for `x.T`, and `np.float32(0)` after every statement."""

    def __init__(self):
        self.before: list[ast.stmt] = []
        self.count = 0

    def visit_Call(self, node):
        self.generic_visit(node)
        for k, arg in enumerate(node.args):
            if isinstance(arg, ast.Call | ast.Attribute | ast.BinOp):
                self.count += 1
                self.before.append(ast.Assign([ast.Name(f"t{self.count}", ast.Store())], arg, lineno=0))
                node.args[k] = ast.Name(f"t{self.count}", ast.Load())
        if isinstance(node.func, ast.Attribute) and node.func.attr == "max" and not node.args:
            return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "max"), [node.func.value], node.keywords)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "load":
            node.keywords = [
                ast.keyword(name, value) for name, value in zip(("buf", "tensor", "rows"), node.args, strict=True)
            ]
            node.args = []
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if node.attr == "T":
            return ast.Call(ast.Attribute(node.value, "transpose", ast.Load()), [], [])
        return node

    def generic_visit(self, node):
        if not isinstance(getattr(node, "body", None), list):
            return super().generic_visit(node)
        outer = self.before
        for field in ("body", "orelse"):  # each statement's temporaries just before it, in its own body
            body = []
            for s in getattr(node, field, []):
                self.before = []
                s = self.visit(s)
                body += [*self.before, s] if isinstance(s, ast.Return) else [*self.before, s, JUNK()]
            if hasattr(node, field):
                setattr(node, field, body)
        self.before = outer
        return node  # (a header is left as it is)


def test_temporaries_keywords_and_numpy_spellings_leave_the_runs_alone(tmp_path):
    """Red team 94: temporaries 0.60, keyword arguments with numpy's names imported 0.70, `np.max(S)` and
    `.transpose()` 0.77, a junk call after every statement 0.52 (a bound method, `load = chip.load`: 0.50)."""
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = ast.unparse(ast.fix_missing_locations(_Temporaries().visit(ast.parse(source)))) + "\n"
    other = other.replace("chip.matmul(", "matmul(").replace("    N, d =", "    matmul = chip.matmul\n    N, d =", 1)
    assert all(mark in other for mark in ("t1 = ", "buf=", "np.max(", ".transpose()", "np.float32(0)", "matmul("))
    assert_one_program(tmp_path, source, other)


def test_a_temporary_read_before_its_assignment_or_bound_twice_stays():
    kept = "def f(x):\n    t = 0\n    for i in x:\n        g(t)\n        t = h(i)\n"  # bound twice; a loop's last turn
    assert "t = h(i)" in normal_form.normalized(kept)
    carried = "def f(x):\n    for i in x:\n        g(u)\n        u = h(i)\n"  # read before it (a loop's last turn)
    assert "u = h(i)" in normal_form.normalized(carried)
    inlined = "def f(x):\n    for i in x:\n        u = h(i)\n        g(u)\n"
    assert normal_form.normalized(inlined) == "def f(x):\n    i = x\n    g(h(i))"


def rewritten_98(source: str) -> str:
    """Red team 98's rewrites of a copy, together: receivers bound twice and as one-line wrappers, numpy's other
    spellings (np.amax, np.add.reduce, `[..., None]`, `.get`, `range(0, T, 1)`), then one line of 600 terms."""
    head, body = source.split("    N, d =", 1)
    bound = "    load, put = chip.load, chip.put\n    load, put = chip.load, chip.put\n"
    wrapper = "    def store(*a, **k):\n        return chip.store(*a, **k)\n\n"
    body = body.replace("chip.load(", "load(").replace("chip.put(", "put(").replace("chip.store(", "store(")
    body = body.replace("S.max(axis=1)", "np.amax(S, axis=1)").replace("P.sum(axis=1)", "np.add.reduce(P, axis=1)")
    body = body.replace("[:, None]", "[..., None]").replace('tensors["K"]', 'tensors.get("K")')
    body = body.replace("range(-(-Nk // Bc))", "range(0, -(-Nk // Bc), 1)")
    return head + bound + wrapper + "    N, d =" + body + "\n_pad = " + " + ".join(["0"] * 600) + "\n"


def test_bound_twice_wrapped_respelled_and_one_deep_line_leave_the_runs_alone(tmp_path):
    """Red team 98: receivers bound twice 0.50, one-line wrappers 0.46, six spellings 0.65; and one line of 500
    terms stopped the normal form (Python's recursion limit), the file compared as written: 0.35 against itself."""
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = rewritten_98(source)
    assert all(mark in other for mark in ("np.amax(", "np.add.reduce(", "[..., None]", ".get(", "def store(*a"))
    assert_one_program(tmp_path, source, other)


def test_a_name_imported_from_numpy_keeps_its_place_and_a_temporary_read_thousands_of_times_stays():
    """Red team 98: `from numpy import exp` then `numpy = np` crashed the normal form (a Name made without a line);
    a temporary of 280 nodes read 3,000 times took the reading past 10 s (each read a copy)."""
    crash = "import numpy as np\nfrom numpy import exp\nnumpy = np\n_one = exp(0.0)\nf(_one)\n"
    assert normal_form.normalized(crash) == "f(np.exp(0.0))"  # exp as numpy.exp, numpy as np, _one put back
    big = " + ".join(f"a[{k}]" for k in range(40))  # 40 terms: 280 nodes or so, pure
    many = "def f(a):\n    t = " + big + "\n    return (" + "t, " * 3000 + ")\n"
    form = normal_form.normalized(many)
    assert "t = " in form and len(form) < 2 * len(many)  # kept, not copied 3,000 times


def rewritten_100(source: str) -> str:
    """Red team 100's rewrites, together: `"".strip()` and a local `nop()` after every statement, every `chip.x(…)`
    as `chip.x.__call__(…)` or through `min(map(chip.x, [a], [b]))`, numpy's operators and `np.newaxis`, a lambda
    wrapper, a wrapper of a wrapper, `chip.__getattribute__("load")`."""
    head, body = source.split("    N, d =", 1)
    wrappers = ("    def nop():\n        return None\n\n    put = lambda *a, **k: chip.put(*a, **k)\n"
                "    def inner(*a, **k):\n        return chip.store(*a, **k)\n\n    def store(*a, **k):\n"
                "        return inner(*a, **k)\n\n    load = chip.__getattribute__('load')\n")  # fmt: skip
    body = body.replace("chip.load(", "load(").replace("chip.put(", "put(").replace("chip.store(", "store(")
    body = body.replace("chip.matmul(", "chip.matmul.__call__(").replace("[:, None]", "[:, np.newaxis]")
    body = body.replace('chip.free("K_j", "V_j")', 'min(map(chip.free, ["K_j"], ["V_j"]))')
    body = body.replace("α * ℓ_i + P.sum(axis=1)", "np.add(np.multiply(α, ℓ_i), P.sum(axis=1))")
    lines = [line + ("\n" + line[: len(line) - len(line.lstrip())] + '"".strip(); nop()' if line.strip()
             and not line.rstrip().endswith(":") and line.startswith("    ") else "") for line in body.split("\n")]  # fmt: skip
    return head + wrappers + "    N, d =" + "\n".join(lines)


def test_idle_calls_dunder_calls_numpy_operators_and_wrappers_of_wrappers_leave_the_runs_alone(tmp_path):
    """Red team 100: `"".strip()` 0.55, a local nop() 0.59, `__call__` 0.58, numpy's operators 0.51, a lambda
    wrapper 0.50, `__getattribute__` 0.52, a wrapper of a wrapper 0.77, `min(map(chip.store, …))` 0.33 (taken as
    idle: a builtin calling what it is given was not looked at)."""
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = rewritten_100(source)
    marks = ('"".strip(); nop()', ".__call__(", "np.newaxis", "min(map(chip.free", "np.add(np.multiply(", "lambda *a")
    assert all(mark in other for mark in marks)
    assert_one_program(tmp_path, source, other)


def test_a_builtin_calling_what_it_is_given_is_idle_only_of_idle_callables():
    kept = "def f(chip, a):\n    min(map(chip.store, [a, a]))\n    sorted(a, key=chip.load)\n"
    assert (
        normal_form.normalized(kept)
        == "def f(chip, a):\n    min(map(chip.store, (a, a)))\n    sorted(a, key=chip.load)"
    )
    idle = "def f(a):\n    min(map(abs, [a, a]))\n    sorted(a, key=lambda x: -x)\n    g(a)\n"
    assert normal_form.normalized(idle) == "def f(a):\n    g(a)"


def rewritten_102(source: str) -> str:
    """Red team 102's rewrites: locals kept in an object (`s.rows`), buffer names as module constants split in two
    ('K_' + 'j'), tuples as lists, `x[:, None]` as `x.reshape(-1, 1)`, min's and np.maximum's arguments swapped."""
    head, body = source.split("    N, d =", 1)
    for name in ("rows", "cols", "m_new", "ℓ_new", "S", "P", "α"):
        body = re.sub(rf"(?<![\w.'\"]){name}(?![\w'\"])", f"s.{name}", body)
    body = body.replace("[:, None]", ".reshape(-1, 1)").replace('"K_j"', "_K + _J")
    body = body.replace("np.maximum(m_i, s.S.max(axis=1))", "np.maximum(s.S.max(axis=1), m_i)")
    for tuple_ in ("(i * Br, min((i + 1) * Br, N))", "(j * Bc, min((j + 1) * Bc, Nk))"):
        body = body.replace(tuple_, "[" + tuple_[1:-1] + "]")
    body = re.sub(r"min\(\((\w) \+ 1\) \* (\w+), (\w+)\)", r"min(\3, (\1 + 1) * \2)", body)
    head = head.replace("def forward", "_K, _J = 'K_', 'j'\n\n\nclass _S:\n    pass\n\n\ndef forward")
    return head + "    s = _S()\n    N, d =" + body


def test_locals_in_an_object_constants_split_lists_reshapes_and_swapped_arguments_leave_the_runs_alone(tmp_path):
    """Red team 102: every local as `s.x` 0.05 (as `LV['x']` 0.04), buffer names as module constants 0.59, split
    0.63, tuples as lists 0.72, `.reshape(-1, 1)` 0.78, min's arguments swapped 0.73."""
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    other = rewritten_102(source)
    marks = ("s.rows = [", "_K + _J", ".reshape(-1, 1)", "min(N, (i + 1) * Br)", "np.maximum(s.S.max(axis=1), m_i)")
    assert all(mark in other for mark in marks), other
    assert_one_program(tmp_path, source, other)
    keyed = other.replace("s = _S()", "s = {}").replace("class _S:\n    pass\n", "")  # LV['x'] for s.x
    keyed = re.sub(r"\bs\.(\w+)", r"s['\1']", keyed)
    assert similarity.fingerprint(keyed) == similarity.fingerprint(source)


def test_triton_s_expand_dims_and_float_infinities_have_one_spelling():
    """Red team 102 on assignment 07: `tl.expand_dims(x, 1)` for `x[:, None]` 0.49, `-float('inf')` 0.91."""
    one = "import triton.language as tl\ng(tl.load(P + r[:, None] + k[None, :], m[None, :] & n[:, None], -float('inf')))\n"
    two = ("import triton.language as tl\n"
           "g(tl.load(P + tl.expand_dims(r, 1) + tl.expand_dims(k, 0), tl.expand_dims(n, 1) & tl.expand_dims(m, 0),"
           " float('-inf')))\n")  # fmt: skip
    assert normal_form.normalized(one) == normal_form.normalized(two) != "pass"


def test_a_reshape_of_names_is_left_as_written():
    """Helper 115: `x.reshape(n, d)` raised in the normal form (its arguments sorted as integers: None < None), so a
    file holding one was not judged at all (33 of the files under the red teams' folders)."""
    source = "def f(x, n, d):\n    return x.reshape(n, d) + x.reshape(-1, 1)\n"
    assert normal_form.normalized(source) == "def f(x, n, d):\n    return x.reshape(n, d) + x[:, None]"


PLAIN = "def f(chip, n):\n    for i in range(n):\n        a = chip.load(i)\n        chip.store(a * 2, i)\n"
HELPER = ("def _step(chip, i):\n    a = chip.load(i)\n    chip.store(a * 2, i)\n    return None\n\n\n"
          "def f(chip, n):\n    for i in range(n):\n        _step(chip, i)\n")  # fmt: skip
CLASS = ("class _Impl:\n    def __init__(self, chip):\n        self.chip = chip\n\n    def step(self, i):\n"
         "        self.a = self.chip.load(i)\n        self.chip.store(self.a * 2, i)\n\n    def run(self, n):\n"
         "        for i in range(n):\n            self.step(i)\n\n\ndef f(chip, n):\n    _Impl(chip).run(n)\n")  # fmt: skip


def test_a_loop_body_moved_into_a_helper_or_a_class_s_methods_is_put_back():
    """Red team 103: each loop's body moved into a helper taking the loop's values, 0.51–0.75; the master wrapped in a
    class (`self.chip.load`), 0.45, its loop body a method, 0.62."""
    plain = normal_form.normalized(PLAIN)
    assert (
        normal_form.normalized(HELPER)
        == plain
        == "def f(chip, n):\n    i = range(n)\n    chip.store(chip.load(i) * 2, i)"
    )
    assert "    chip.store(chip.load(i) * 2, i)" in normal_form.normalized(CLASS)  # self.step(i) put back, self. gone
    recursive = HELPER.replace("    return None", "    _step(chip, i - 1)")  # called twice (itself): kept
    assert "def _step(chip, i):" in normal_form.normalized(recursive)


def test_a_comprehension_standing_as_a_statement_is_the_loop_it_is():
    """Red team 103: the init loop as `[(store(…), store(…), free(…)) for rows in …]`, 0.84 alone, more with others."""
    loop = "def f(chip, n):\n    for i in range(n):\n        chip.store(i)\n        chip.free(i)\n"
    comprehension = "def f(chip, n):\n    [(chip.store(i), chip.free(i)) for i in range(n)]\n"
    assert normal_form.normalized(comprehension) == normal_form.normalized(loop)


def test_an_f_string_whose_expression_gains_a_backslash_is_still_judged():
    """Helper 115: Python 3.11 cannot write back an f-string whose expression part holds a string with a backslash,
    which a temporary put back there makes (`found = "\\"` read in `f"{found!r}"`): the normal form raised and the
    file went unjudged, a copy too. f-strings are now calls of their parts."""
    source = (SUBMISSIONS / "algorithm1.py").read_text()
    said = "\n\ndef _say(line):\n    found = next((s for s in ('#', '\\\\') if s in line), None)\n    if found:\n"
    said += "        raise ValueError(f'line holds {found!r}')\n\n\n_say('')\n"
    assert "f(" in normal_form.normalized(source + said)  # raised ValueError before
    copy = similarity.fingerprint(source + said)
    assert similarity.score(copy, similarity.fingerprint(source)) >= similarity.THRESHOLD
