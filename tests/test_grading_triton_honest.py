"""Assignments 7–8: honest kernels the allow-list once refused (helper 110), taken and graded, beside the forms that
stay refused because the GPU compiler and the interpreter would disagree on them.

Taken: a local `NAME: tl.constexpr = ` a value known when compiled (Triton's tutorial: `MASK_BLOCK_M1:
tl.constexpr = BLOCK_M1 // BLK_SLICE_FACTOR`; a step that counts down, `STEP: tl.constexpr = -BLOCK_N`),
a tensor's `.type` (a dtype, pointer or block type: `O.type.element_ty`), `tl.tensor` as a parameter's
annotation, the hint `tl.max_constancy`, and a module constant made by arithmetic (`arithmetic`). Still
refused, with the reason: `del`, which Triton's compiler does not compile.
"""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from grading_submissions import triton_kernels as kernels

from sim.core.errors import InputError
from sim.grading import grader, spec
from sim.grading.triton import allowlist
from sim.grading.triton import grade as triton_grade

TRITON = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'flashsim[assignments-triton]'; Linux x86_64/aarch64 only)",
)
HEADER = "import triton\nimport triton.language as tl\n\n"
KERNEL = "@triton.jit\ndef k(X, Y, n, B: tl.constexpr):\n    i = tl.program_id(0)\n{}\n"  # the body from line 7
HONEST = (  # edits of assignment 7's master, as helper 110's kernels wrote them
    ("    for start in range(0, hi, BLOCK_N):", "    HALF: tl.constexpr = BLOCK_N // 2\n"
     "    WHOLE: tl.constexpr = min(HALF * 2, BLOCK_N)\n    for start in range(0, hi, WHOLE):"),
    ("O_i.to(O.dtype.element_ty)", "O_i.to(O.type.element_ty)"),
    ('        S_ij = tl.where(seen, S_ij, float("-inf"))\n', "        S_ij = masked(S_ij, seen)\n"),
    ("@triton.jit\ndef flash2_forward(", '@triton.jit\ndef masked(s, ok: tl.tensor) -> tl.tensor:\n    return '
     'tl.where(ok, s, float("-inf"))\n\n\n@triton.jit\ndef flash2_forward('),
    ("            seen = seen & (keys[None, :] <= rows[:, None] + Nk - N)",
     "            edge = tl.max_constancy(rows[:, None] + Nk - N + 0 * keys[None, :], [1, BLOCK_N])\n"
     "            seen = seen & (keys[None, :] <= edge)"),
)  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        "    HALF: tl.constexpr = B // 2\n    STEP: tl.constexpr = -min(HALF * 2, 64)\n    x = HALF > 0 and STEP < 0",
        "    t = X.type.element_ty\n    s = (X + 1).type.shape",
        "    x = tl.max_constancy(tl.arange(0, B) * 0, [B])",
    ],
)
def test_an_honest_kernel_the_allow_list_once_refused_is_taken(body):
    assert allowlist.check(HEADER + KERNEL.format(body)) == set()
    helper = "@triton.jit\ndef h(s, ok: tl.tensor, p: triton.language.tensor) -> tl.tensor:\n    return s\n"
    assert allowlist.check(HEADER + helper) == set()


@pytest.mark.parametrize(
    "body, line, message",
    [  # a value known only at run time kept as a constant: the interpreter's number, a GPU's tensor
        ("    x: tl.constexpr = tl.program_id(0)", 7, "a kernel may not annotate an assignment but NAME: tl.constexpr"),
        ("    x: tl.constexpr = n", 7, "a kernel may not annotate an assignment but"),
        ("    x: tl.constexpr = i * B", 7, "a kernel may not annotate an assignment but"),
        ("    x: tl.constexpr = tl.cdiv(B, 2)", 7, "a kernel may not annotate an assignment but"),
        ("    x: tl.constexpr = B\n    x = i", 7, "a kernel may not annotate an assignment but"),  # bound again
        ("    B = i\n    x: tl.constexpr = B", 8, "a kernel may not annotate an assignment but"),  # B rebound
        ("    x: tl.int32 = 1", 7, "a kernel may not annotate an assignment but"),
        ("    x: tl.constexpr", 7, "a kernel may not annotate an assignment but"),
        ("    B = i\n    x = B or 2", 8, "and/or may stand only as a condition"),  # B no longer a constexpr
        ("    min = tl.maximum\n    x: tl.constexpr = min(B, 2)", 8, "a kernel may not annotate an assignment but"),
        # tl.tensor only as an annotation; .type leads to a dtype, never to the handle
        ("    x = tl.tensor(i.handle, i.type)", 7, "tl.tensor is not part of Triton's language a kernel may use but "
         "as a parameter's annotation"),
        ("    x = X.type.handle", 7, "X.type.handle is not part of Triton's language a kernel may use: it is the "
         "interpreter's raw array or pointer"),
    ],
)  # fmt: skip
def test_what_a_gpu_would_take_otherwise_stays_refused(body, line, message):
    with pytest.raises(InputError, match=re.escape(f"kernel file line {line}: {message}")):
        allowlist.check(HEADER + KERNEL.format(body))


@pytest.mark.parametrize(
    "body, message",
    [
        ("    x = X.foo", "X.foo is not part of Triton's language a kernel may use; a tensor's are its methods"),
        ("    x = tl.foo", "tl.foo is not part of Triton's language a kernel may use"),
        ("    x = tl.math.foo", "tl.math.foo is not part of Triton's language a kernel may use; tl.math's are abs,"),
        ("    x = math.foo", "math.foo is not part of Triton's language a kernel may use; math's are e, exp,"),
        ("    x = triton.foo", "triton.foo is not part of Triton's language a kernel may use; triton's are jit,"),
        ("    x = tl.core.exp", "tl.core.exp is not part of Triton's language a kernel may use; write tl.NAME"),
    ],
)
def test_a_refused_attribute_is_named_without_a_word_of_handles(body, message):
    with pytest.raises(InputError) as refused:
        allowlist.check(HEADER + "import math\n" + KERNEL.format(body))
    assert message in str(refused.value) and "handle" not in str(refused.value), str(refused.value)


@TRITON
def test_an_annotated_constexpr_local_is_a_constant_step_and_a_rebound_one_is_not():
    """constness: a local that `NAME: tl.constexpr = value` alone binds is judged by its value (a GPU counts
    `range(top, -1, STEP)` down), a helper's by the call too; bound a second time it is a local like any."""
    from sim.grading.triton import loops  # (it imports Triton's interpreter)

    source = HEADER + (
        "@triton.jit\ndef walk(X, top, step):\n    S: tl.constexpr = -step\n    for i in range(top, -1, S):\n"
        "        pass\n\n"
        "@triton.jit\ndef kernel(X, Nk, B: tl.constexpr):\n    top = Nk\n    STEP: tl.constexpr = -B\n"
        "    TWICE: tl.constexpr = STEP * 2\n    for i in range(top, -1, TWICE):\n        pass\n"
        "    AGAIN: tl.constexpr = -B\n    AGAIN = -Nk\n    for i in range(top, -1, AGAIN):\n        pass\n"
    )  # fmt: skip
    lines = source.split("\n")
    at = [n + 1 for n, text in enumerate(lines) if text.startswith("    for i in range(top, -1, ")]
    assert loops.sites(source, "kernel") == dict(zip(at, [{"step"}, False, True], strict=True))


def master_with(edits, path):
    """The master with each (old, new) of `edits` made once (old found exactly once), written to `path`."""
    text = kernels.MASTER.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


@TRITON
def test_the_master_written_as_helper_110_s_honest_kernels_wrote_it_scores_full_marks(tmp_path):
    path = master_with(HONEST, tmp_path / "honest.py")
    assignment = spec.load(kernels.MASTER)
    (report,) = grader.grade(assignment, [path], seed=5, jobs=1)
    assert report.score == report.max_score == 100, [t.feedback for t in report.tests if t.status != "passed"]


ARITHMETIC = (  # helper 110's RCP_LN2 = tl.constexpr(1.0 / 0.6931471805599453), and math's
    ("import triton\n", "import math\n\nimport triton\n"),
    ("LOG2E = tl.constexpr(1.4426950408889634)", "LOG2E = tl.constexpr(1.0 / 0.6931471805599453)"),
    ("LN2 = tl.constexpr(0.6931471805599453)", "LN2 = tl.constexpr(1 / math.log2(math.e))"),
)


@TRITON
def test_the_master_with_its_constants_made_by_arithmetic_grades_as_the_master(tmp_path):
    path = master_with(ARITHMETIC, tmp_path / "arithmetic.py")
    (master := tmp_path / "master.py").write_text(kernels.MASTER.read_text())
    graded = grader.grade(spec.load(kernels.MASTER), [master, path], seed=5, jobs=1)
    tests = [[(t.name, t.status, t.points, t.hbm_bytes) for t in report.tests] for report in graded]
    assert tests[0] == tests[1] and graded[1].score == graded[1].max_score == 100, [t.feedback for t in graded[1].tests]


DEL = (
    "Triton's compiler does not compile `del` (unsupported AST node type: Delete); drop it: a GPU frees a tile after "
    "its last use, and so does the SRAM count (`liveness`)"
)


@pytest.mark.parametrize(
    "body, line",
    [
        ("    x = i * 2\n    del x", 8),  # helper 110's p11: a tile after its last use
        ("    del X", 7),  # an argument
        ("    x = i\n    y = x\n    del x, y", 9),
        ("    del X[0]", 7),
        ("    del X.dtype", 7),
        ("    for j in range(n):\n        x = j\n        del x", 9),
    ],
)
def test_del_is_refused_in_one_line_saying_why(body, line):
    with pytest.raises(InputError) as refused:
        allowlist.check(HEADER + KERNEL.format(body))
    assert str(refused.value) == f"kernel file line {line}: {DEL}"


@TRITON
def test_the_reason_del_is_refused_holds_triton_s_compiler_has_no_del(tmp_path):
    """The reference the refusal rests on: Triton's code generator has no visit_Delete (3.9). Compiled in a fresh
    process, as the compile check compiles: Triton's language, once imported under TRITON_INTERPRET=1 (by another
    test here), interprets for the rest of the process and compiles nothing."""
    (path := tmp_path / "with_del.py").write_text(HEADER + KERNEL.format("    x = i * 2\n    del x"))
    script = (
        "import importlib.util, sys\nimport triton\nfrom triton.backends.compiler import GPUTarget\n"
        f"spec = importlib.util.spec_from_file_location('with_del', {str(path)!r})\n"
        "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
        "signature = {'X': '*fp32', 'Y': '*fp32', 'n': 'i32', 'B': 'constexpr'}\n"
        "source = triton.compiler.ASTSource(fn=module.k, signature=signature, constexprs={'B': 16})\n"
        "try:\n    triton.compile(source, target=GPUTarget('cuda', 90, 32), options={'num_warps': 4})\n"
        "except triton.compiler.CompilationError as e:\n    print(e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env |= {"TRITON_CACHE_DIR": str(tmp_path / "cache"), "TRITON_DEFAULT_FP_FUSION": "1"}  # (as the compile check)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "unsupported AST node type: Delete" in done.stdout, done.stdout + done.stderr


@TRITON
def test_the_master_with_a_del_is_refused_before_it_runs_naming_the_line(tmp_path):
    old = "        V_j = tl.load(V + keys[:, None] * d + cols[None, :], mask=kv, other=0.0)\n"
    text = kernels.MASTER.read_text()
    assert text.count(old) == 1
    (path := tmp_path / "deletes.py").write_text(text.replace(old, old + "        del K_j\n"))
    line = text.split("\n").index(old.rstrip("\n")) + 2
    assert triton_grade.refusal(path, spec.load(kernels.MASTER).grading) == f"refused: deletes.py line {line}: {DEL}"
