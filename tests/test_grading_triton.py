"""Assignment 7, a Triton kernel graded on a CPU: the allow-list, the shadow memory, and whole submissions graded.

The allow-list and shadow memory need only NumPy; grading a submission needs Triton (the optional
extra `assignments-triton`), and those tests skip with the reason where it is absent.
"""

import importlib.util
import os
import re
from dataclasses import replace
from math import ceil
from pathlib import Path

import numpy as np
import pytest
from grading_submissions import triton_kernels as kernels
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.core.errors import InputError
from sim.grading import export, grader, spec
from sim.grading.triton import allowlist, compile_check, launch, score
from sim.grading.triton import grade as triton_grade
from sim.grading.triton.shadow import Buffer, MemoryFault, Shadow

ASSIGNMENT = spec.load(kernels.MASTER)
needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'flashsim[assignments-triton]'; Linux x86_64/aarch64 only)",
)
HEADER = "import triton\nimport triton.language as tl\n\n"
KERNEL = "@triton.jit\ndef k(X, Y, n, B: tl.constexpr):\n    i = tl.program_id(0)\n{}\n"


# -- the allow-list ------------------------------------------------------------------


def test_the_masters_pass_the_allow_list_and_their_exports_are_stubs(tmp_path):
    assert allowlist.check(kernels.MASTER.read_text()) == set()
    student = export.export(kernels.MASTER, student=tmp_path)
    assert allowlist.check(student.read_text()) == {"flash2_forward"}
    backward = export.export(spec.locate("08"), student=tmp_path)
    assert allowlist.check(backward.read_text()) == {"flash2_backward_preprocess", "flash2_backward"}


@pytest.mark.parametrize(
    "body, line, message",
    [
        ("    x = Y.handle", 7, ".handle is not part of Triton's language"),
        ("    x = X.__class__", 7, "may not reach private or dunder attributes"),
        ("    x = tl.core", 7, ".core is not part of Triton's language"),
        ("    x = tl.inline_asm_elementwise", 7, ".inline_asm_elementwise is not part of"),
        ("    x = getattr(X, 'handle')", 7, "getattr is not a name a kernel may use"),
        ("    x = eval('1')", 7, "eval is not a name a kernel may use"),
        ("    import os", 7, "a kernel may not use Import"),
        ("    f = lambda: 0", 7, "a kernel may not use Lambda"),
        ("    def g():\n        pass", 7, "a kernel may not use FunctionDef"),
        ("    try:\n        pass\n    except Exception:\n        pass", 7, "a kernel may not use Try"),
        ("    raise ValueError('no')", 7, "may raise only NotImplementedError"),
        ("    x = f'{i}'", 7, "a kernel may not use JoinedStr"),
        # red team 83: Python numbers made of data and state kept in a module's list, neither in the SRAM count
        ("    x = int(tl.sum(X))", 7, "int() of a value would make a Python number of it"),
        ("    x = float(i)", 7, "float() of a value would make a Python number of it"),
        ("    x = bool(X)", 7, "bool() of a value"),
        ("    x = int(x=1)", 7, "int() of a value"),
        ("    STASH[0] = i", 7, "a kernel may assign only to names"),
        ("    STASH[0] += i", 7, "a kernel may assign only to names"),
        ("    X.dtype = i", 7, "a kernel may assign only to names"),
        # red team 85: `min(s, s) is s` is true under the interpreter, a constant False to the compiler, which then
        # compiled an empty branch while the interpreter ran the other
        ("    if min(n, n) is n:\n        x = 1", 7, "a kernel may not compare with `is`"),
        ("    x = n is not None", 7, "a kernel may not compare with `is`"),
        # red team 88: the compiler took tl.constexpr(a tensor) for True, compiling an empty branch
        ("    if tl.constexpr(i < 0) and 1:\n        x = 1", 7, "tl.constexpr() of a value: the compiler takes it"),
        ("    x = triton.language.constexpr(n)", 7, "tl.constexpr() of a value"),
        # red team 89: the compiler's `or` kept the constant 2 where Python kept the tensor n > 0
        ("    if ((n > 0) or 2) == 2:\n        x = 1", 7, "and/or may stand only as a condition"),
        ("    x = i < 0 and B", 7, "and/or may stand only as a condition"),
        ("    x: tl.constexpr = (n > 0) or 2", 7, "a kernel may not annotate an assignment"),
    ],
)
def test_a_kernel_body_outside_the_language_is_refused_at_its_line(body, line, message):
    with pytest.raises(InputError, match=re.escape(f"kernel file line {line}: ") + ".*" + re.escape(message)):
        allowlist.check(HEADER + KERNEL.format(body))


def test_a_kernel_may_not_name_a_constant_it_could_change():
    # red team 85: `B = STASH; B += [x]` grew a module list that outlived every program and test
    source = (
        HEADER
        + "STASH = []\nSIZES = (1, 2)\nLIMIT = tl.constexpr(4)\n\n"
        + KERNEL.format("    x = SIZES[0] + LIMIT\n    B = STASH\n    B += [x]")
    )
    with pytest.raises(InputError, match=r"kernel file line 12: STASH is a list, dict or set: a kernel may use only"):
        allowlist.check(source)
    assert allowlist.check(source.replace("    B = STASH\n    B += [x]\n", "")) == set()


@pytest.mark.parametrize(
    "module, line, message",
    [
        ("import numpy as np\n", 1, "imports numpy; a kernel file may import only triton, triton.language, math"),
        ("import torch\n", 1, "imports torch"),
        ("from os import path\n", 1, "imports from os"),
        ("import triton.language\n", 1, "write `import triton.language as tl`"),
        ("X: tl.constexpr = 1\n", 3, "NAME = tl.constexpr(literal)"),
        ("X = len('ab')\n", 3, "must be a literal"),
        ("print('hello')\n", 3, "may not hold a Expr statement"),
        ("class C:\n    pass\n", 3, "may not hold a ClassDef statement"),
        ("def helper():\n    return 1\n", 3, "helper must be a @triton.jit function"),
        ("@triton.jit(debug=True)\ndef g():\n    pass\n", 4, "g must be a @triton.jit function"),
    ],
)
def test_a_module_outside_imports_constants_and_kernels_is_refused(module, line, message):
    source = module + HEADER if module.startswith(("import", "from")) else HEADER.rstrip("\n") + "\n" + module
    with pytest.raises(InputError, match=re.escape(f"kernel file line {line}: ") + ".*" + re.escape(message)):
        allowlist.check(source)


def test_and_or_as_conditions_are_taken():
    body = "    if (n > 0 and i < 3) or not (B > 1 or n < 0):\n        x = 1 if i > 0 and n > 0 else 2\n    while i < 0 and n < 0:\n        i = i + 1"
    body += "\n    for s in range(0, n, B):\n        x = s\n    for s in tl.static_range(4, 0, -1):\n        x = s"
    body += "\n    tl.static_assert(B >= 16 and B <= 256)"  # red team 93: refused as an and/or outside a condition
    assert allowlist.check(HEADER + KERNEL.format(body)) == set()


def test_a_name_defined_twice_is_refused():
    """Red team 88: a stub def of the kernel's name before the kernel made the compile check skip the kernel (stubs
    are skipped by name) while Python ran the second: 100/100 for code no GPU compiler takes."""
    stub = "@triton.jit\ndef k(X, Y, n, B: tl.constexpr):\n    raise NotImplementedError('k')\n\n"
    with pytest.raises(InputError, match=re.escape("kernel file line 9: k is defined twice")):
        allowlist.check(HEADER + stub + KERNEL.format("    x = 1"))
    with pytest.raises(InputError, match="LIMIT is defined twice"):
        allowlist.check(HEADER + "LIMIT = 1\nLIMIT = 2\n")
    with pytest.raises(InputError, match="tl is defined twice"):
        allowlist.check(HEADER + "import math as tl\n")


SIGNATURE = "@triton.jit\ndef k(X, Y, n{}){}:\n    i = tl.program_id(0)\n"


@pytest.mark.parametrize(
    "arguments, returns, message",
    [  # red team 86: Python evaluates these when the file is loaded; a return annotation print(...) forged a verdict
        ("", ' -> print(\'{"error": ""}\')', "k's annotations may only be names (tl.constexpr, tl.int32)"),
        (", B: print('x')", "", "k's annotations may only be names"),
        (", B: tl.constexpr[0]", "", "k's annotations may only be names"),
        (", B=print('x')", "", "k's defaults may only be numbers, strings, True, False or None"),
        (", *, B=(1,)", "", "k's defaults may only be numbers"),
        # what honest kernels write (red team 93: tl.int32 and a default of -1 were refused)
        (", B: tl.constexpr = 4, C: triton.language.constexpr = None", "", None),
        (", B: tl.int32, C: 'tl.constexpr' = -1", " -> None", None),
    ],
)
def test_a_kernel_s_signature_holds_nothing_python_would_run_at_its_load(arguments, returns, message):
    source = HEADER + SIGNATURE.format(arguments, returns)
    if message is None:
        assert allowlist.check(source) == set()
        return
    with pytest.raises(InputError, match=re.escape("kernel file line 5: " + message)):
        allowlist.check(source)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
@example(text="\x00")  # Python 3.11.2's parser raised ValueError on it, not SyntaxError: a traceback
def test_any_text_is_accepted_or_refused_in_one_line(text):
    try:
        assert isinstance(allowlist.check(text), set)
    except InputError as e:
        assert str(e).startswith("kernel file line ") and "\n" not in str(e)


def test_a_triton_assignment_without_its_algorithm_is_refused(tmp_path):
    bad = tmp_path / "09_bad.py"
    bad.write_text('GRADING = {"driver": "triton", "entry": "k"}\nTESTS = []\n')
    with pytest.raises(InputError, match="GRADING needs 'algorithm' for the triton driver"):
        spec.load(bad)


# -- shadow memory ---------------------------------------------------------------------


def test_a_buffer_hands_out_a_decoy_of_nan_and_keeps_its_values_private():
    values = np.arange(12, dtype=np.float16).reshape(3, 4)
    b = Buffer("Q", values)
    assert b.data_ptr() == b.decoy.ctypes.data != b.values.ctypes.data
    assert np.isnan(b.decoy.astype(np.float32)).all() and b.decoy.shape == (3, 4)
    b.decoy[:] = 7  # what a host-side write through the raw pointer does
    np.testing.assert_array_equal(b.values, values)
    assert b.data_ptr() % 64 == 0 and b.dtype == np.float16 and b.stride() == (4, 1)


def test_the_shadow_maps_each_address_to_its_tensor_and_element_and_refuses_the_rest():
    q, k = Buffer("Q", np.zeros((4, 8), np.float32)), Buffer("K", np.zeros((6, 8), np.float16))
    shadow = Shadow([q, k])
    which, element = shadow.locate(np.array([k.data_ptr() + 2 * 5, k.data_ptr() + 2 * 47]), 2, "a load")
    assert [shadow.buffers[w].name for w in which] == ["K", "K"] and element.tolist() == [5, 47]
    which, element = shadow.locate(np.array([q.data_ptr() + 4 * 31]), 4, "a load")
    assert shadow.buffers[which[0]].name == "Q" and element.tolist() == [31]
    with pytest.raises(MemoryFault, match="a load reaches element 48 of K, which has 48"):
        shadow.locate(np.array([k.data_ptr() + 2 * 48]), 2, "a load")
    with pytest.raises(MemoryFault, match="reaches element -1 of Q, which has 32"):
        shadow.locate(np.array([q.data_ptr() - 4]), 4, "a load")
    with pytest.raises(MemoryFault, match="not a whole 4-byte element"):
        shadow.locate(np.array([q.data_ptr() + 2]), 4, "a load")
    with pytest.raises(MemoryFault, match="reaches both"):
        shadow.locate(np.array([q.data_ptr(), k.data_ptr()]), 2, "a store")


def test_the_record_of_a_launch_is_read_back_and_checked():
    rows = np.array([[0, 0, 12, 100], [0, 0, 15, 28], [3, 1, 20, 64], [-1, 2, 15, 4096]], dtype=np.float64)
    got = score.ledger(rows, ["Q", "K", "V", "O"])
    assert got.booked["Q"] == {"read": 128, "write": 0} and got.booked["O"] == {"read": 0, "write": 64}
    assert got.lines[("Q", "read")] == {12: 100, 15: 28} and (got.tiles, got.program, got.line) == (4096, 2, 15)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(-5, 1e6, allow_nan=False), min_size=4, max_size=4), max_size=6))
def test_a_forged_record_is_read_or_refused_never_misread(rows):
    array = np.array(rows, dtype=np.float64).reshape(-1, 4)
    try:
        got = score.ledger(array, ["Q", "K"])
    except ValueError as e:
        assert str(e) == "the record of loads and stores is malformed"
    else:
        assert all(n >= 0 for rw in got.booked.values() for n in rw.values())


@pytest.mark.parametrize("d, D", [(1, 16), (10, 16), (16, 16), (17, 32), (40, 64), (64, 64), (65, 128)])
def test_block_d_is_d_rounded_up_to_a_power_of_two_at_least_16(d, D):
    assert launch.block_d(d) == D


# -- whole submissions, graded under the interpreter ------------------------------------


def grade(path: Path, *names: str, seed: int = 5):
    """One submission graded on the named tests of assignment 7 (all of them if none are named)."""
    tests = tuple(t for t in ASSIGNMENT.tests if not names or t["name"] in names)
    (report,) = grader.grade(replace(ASSIGNMENT, tests=tests), [path], seed=seed, jobs=1)
    return {t.name: t for t in report.tests}, report


def flash2_bytes(N: int, Nk: int, d: int, Br: int, s: int) -> int:
    """FlashAttention-2 without a mask, by hand: Q once, K and V once per Q block, O and L (float32) written once."""
    return s * N * d + s * 2 * ceil(N / Br) * Nk * d + s * N * d + 4 * N


@needs_triton
def test_the_master_scores_full_marks_and_moves_the_closed_form_bytes():
    results, report = grade(kernels.MASTER)
    assert all(t.status == "passed" for t in results.values()), [t.feedback for t in results.values()]
    assert report.score == report.max_score == 100 and not report.flags
    io = results["IO against FlashAttention-2"]
    c = kernels.shape(io)
    assert io.hbm_bytes == flash2_bytes(c["N"], c["Nk"], c["d"], c["Br"], 2)


@needs_triton
def test_the_exported_stub_scores_zero_and_says_what_is_missing(tmp_path):
    stub = export.export(kernels.MASTER, student=tmp_path)
    results, report = grade(stub, "one block", "IO against FlashAttention-2")
    assert report.score == 0
    assert all(t.feedback.startswith("not implemented yet: one program per Q block") for t in results.values())


@needs_triton
def test_reloading_q_inside_the_kv_loop_is_correct_but_loses_the_io_marks(tmp_path):
    results, _ = grade(kernels.reloads_q(tmp_path), "one block", "IO against FlashAttention-2")
    assert results["one block"].status == "passed"
    io = results["IO against FlashAttention-2"]
    c = kernels.shape(io)
    Tc = ceil(c["Nk"] / c["Bc"])
    assert io.points < io.max_points and io.feedback.startswith(f"correct, but Q was read {1 + Tc} times where")
    line = 1 + kernels.MASTER.read_text()[: kernels.MASTER.read_text().index(kernels.K_LOAD)].count("\n")
    assert f"Q is read at lines {line}, " in io.feedback  # the reload, inserted before K_j's load


@needs_triton
def test_materializing_s_in_hbm_is_correct_but_scores_no_io(tmp_path):
    results, _ = grade(kernels.writes_s(tmp_path), "ragged, N ≠ Nk, fp16", "IO against FlashAttention-2")
    assert results["ragged, N ≠ Nk, fp16"].status == "passed"
    io = results["IO against FlashAttention-2"]
    c = kernels.shape(io)
    assert io.points == 0 and "W was read once where FlashAttention-2 never reads it" in io.feedback
    assert "W was written once where FlashAttention-2 never writes it" in io.feedback
    assert io.hbm_bytes == flash2_bytes(c["N"], c["Nk"], c["d"], c["Br"], 2) + 2 * 4 * c["N"] * c["Nk"]


@needs_triton
def test_a_causal_mask_without_its_diagonal_fails_the_causal_tests_only(tmp_path):
    results, _ = grade(kernels.off_by_one(tmp_path), "one block", "causal, fp16")
    assert results["one block"].status == "passed"
    causal = results["causal, fp16"]
    assert causal.points == 0 and re.match(r"O\[\d+, \d+\] is .* where the reference is .*allowed", causal.feedback)


@needs_triton
def test_a_load_past_the_end_of_k_fails_before_memory_is_touched(tmp_path):
    results, _ = grade(kernels.unmasked_k(tmp_path), "ragged, N ≠ Nk, fp16")
    (result,) = results.values()
    c = kernels.shape(result)
    assert result.points == 0 and result.feedback.startswith(
        f"raised MemoryFault: a load reaches element {c['Nk'] * c['d']:,} of K, which has {c['Nk'] * c['d']:,}"
    )


@needs_triton
def test_four_kv_blocks_at_a_time_exceed_the_sram_budget(tmp_path):
    results, _ = grade(kernels.whole_rows(tmp_path), "one block")
    (result,) = results.values()
    assert result.points == 0 and re.match(
        r"program 0 held [\d.]+ KiB of tiles at line \d+, over the SRAM", result.feedback
    )


@needs_triton
@pytest.mark.parametrize("module", ["numpy", "torch"])
def test_a_kernel_calling_numpy_or_torch_is_refused_unrun(tmp_path, module):
    results, report = grade(kernels.calls(tmp_path, module), "one block", "causal, fp16")
    assert report.score == 0 and {t.status for t in results.values()} == {"not run"}
    line = 1 + kernels.MASTER.read_text().split("\n").index("import triton.language as tl")
    expected = f"refused: calls_{module}.py line {line}: imports {module}; a kernel file may import only triton"
    assert all(t.feedback.startswith(expected) for t in results.values())


@needs_triton
def test_a_kernel_computing_on_the_host_through_raw_pointers_scores_zero(tmp_path):
    results, report = grade(kernels.host(tmp_path), "one block", "logits in the hundreds")
    assert report.score == 0
    assert all(re.match(r"refused: host.py line \d+: imports ctypes", t.feedback) for t in results.values())


@needs_triton
def test_past_the_allow_list_shadow_memory_still_leaves_a_host_computation_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(triton_grade, "refusal", lambda path, grading, cases: "")  # the first two walls down
    results, report = grade(kernels.host(tmp_path), "one block", "logits in the hundreds")
    assert report.score == 0
    for t in results.values():
        assert t.feedback == f"O has {kernels.shape(t)['N']} rows never written by tl.store (still NaN)"


@needs_triton
def test_a_kernel_the_interpreter_runs_but_no_gpu_compiles_is_refused(tmp_path):
    results, report = grade(kernels.host_dict(tmp_path), "one block")
    (result,) = results.values()
    assert report.score == 0 and re.match(
        r"refused: host_dict.py line \d+: does not compile for a GPU", result.feedback
    )
    (result,) = grade(kernels.host_int(tmp_path), "one block")[0].values()  # before: the compiler's refusal
    assert re.match(r"refused: host_int.py line \d+: int\(\) of a value would make a Python number", result.feedback)


@needs_triton
def test_code_behind_a_block_size_branch_is_compiled_at_every_tests_sizes(tmp_path):
    """Red team 83: each kernel was compiled at one case (BLOCK_M = 64, d = 64, causal), which no test of assignment
    7 uses, and Triton compiles only the branches a constexpr takes: code behind `if BLOCK_M != 64` never met it."""
    path = kernels.branch_dict(tmp_path)
    assert compile_check.error(path, ASSIGNMENT.grading) == ""  # the representative case alone: not seen
    results, report = grade(path, "one block", "causal, fp16")
    assert report.score == 0
    for result in results.values():
        assert re.match(r"refused: branch_dict.py line \d+: does not compile for a GPU", result.feedback), result


@needs_triton
def test_a_compile_that_does_not_finish_its_verdict_is_refused(tmp_path, monkeypatch):
    """Red team 86: a compile killed at its CPU limit printed nothing, and the last line the file had printed at its
    load ({"error": ""}) was taken as the verdict. The verdict now comes through a pipe of its own, from a process
    that ended well; a process that ran out of CPU time or address space is a refusal, in one line."""
    monkeypatch.setattr(compile_check, "CPU_S", 3)
    message = compile_check.error(kernels.unrolls_dead_branch(tmp_path), ASSIGNMENT.grading)
    assert message == "compiling flash2_forward for sm_90 failed: it ended with signal 24", message  # SIGXCPU
    monkeypatch.setattr(compile_check, "AS_BYTES", 64 << 20)  # too little to import Triton
    message = compile_check.error(kernels.MASTER, ASSIGNMENT.grading)
    assert message.startswith("compiling flash2_forward for sm_90 failed: ") and "\n" not in message, message


@needs_triton
def test_rounding_p_to_fp16_fails_the_fp16_tests_with_the_reason(tmp_path):
    results, _ = grade(kernels.rounds_p(tmp_path), "one block", "ragged, N ≠ Nk, fp16")
    assert results["one block"].status == "passed"  # fp32: V's dtype is float32, nothing is rounded
    fp16 = results["ragged, N ≠ Nk, fp16"]
    assert fp16.points == 0 and fp16.feedback.endswith("keep P̃_ij in float32 for P̃_ij V_j")


@needs_triton
def test_a_tensor_descriptor_load_is_counted_like_pointer_loads(tmp_path):
    results, _ = grade(kernels.descriptor_k(tmp_path), "IO against FlashAttention-2")
    io = results["IO against FlashAttention-2"]
    c = kernels.shape(io)
    assert io.status == "passed" and io.hbm_bytes == flash2_bytes(c["N"], c["Nk"], c["d"], c["Br"], 2)


@needs_triton
def test_the_backward_master_scores_full_marks_and_moves_the_closed_form_bytes():
    backward = spec.load(spec.locate("08"))
    (report,) = grader.grade(backward, [backward.path], seed=5, jobs=1)
    results = {t.name: t for t in report.tests}
    assert all(t.status == "passed" for t in results.values()), [t.feedback for t in results.values()]
    assert report.score == 100
    io = results["IO, N ≠ Nk"]  # not causal: every Q block against every K/V block
    N, Nk, d, Bc, s, f = *(kernels.shape(io)[k] for k in ("N", "Nk", "d", "Bc")), 4, 4
    prepass = 2 * s * N * d + s * N * d + f * N  # read O, dO; write dQ = 0 and D
    per_kv_block = 2 * s * N * d + 2 * f * N + 2 * s * N * d  # read Q, dO, L, D; dQ += by atomic add (read, write)
    assert io.hbm_bytes == prepass + 4 * s * Nk * d + ceil(Nk / Bc) * per_kv_block  # + K, V read, dK, dV written


@needs_triton
def test_the_backward_stub_scores_zero(tmp_path):
    stub = export.export(spec.locate("08"), student=tmp_path)
    (report,) = grader.grade(spec.load(spec.locate("08")).public(), [stub], seed=5, jobs=1)
    assert report.score == 0 and all(t.feedback.startswith("not implemented yet: ") for t in report.tests)


@needs_triton
def test_a_compile_error_inside_a_called_function_names_the_callee_s_error(tmp_path):
    """The compiler's error at a call quotes the call with a caret and keeps the callee's as its cause: the line once
    read "does not compile for a GPU (sm_90): ^"."""
    message = compile_check.error(kernels.hides(tmp_path, "a callee's dict"), ASSIGNMENT.grading)
    # the callee's own error, worded by Triton's version, never the call's caret
    assert re.fullmatch(r"hides_in_a_callee's_dict.py line \d+: does not compile for a GPU \(sm_90\): .{8,}",
                        message) and "^" not in message, message  # fmt: skip


@needs_triton
def test_the_grader_never_parses_a_kernel_file_in_its_own_process(tmp_path, monkeypatch):
    """Red team 84: a 1 MiB f-string held the GIL 111 s in the allow-list's ast.parse inside a grading thread, and a
    classmate graded meanwhile ran out of its wall clock (0/100). The file is parsed in compile_check's process."""
    from sim.grading.triton import allowlist as in_process

    monkeypatch.setattr(in_process, "check", lambda *a: pytest.fail("parsed in the grader's process"))
    results, report = grade(kernels.MASTER, "one block")
    assert report.score == results["one block"].max_points
    big = tmp_path / "big.py"
    big.write_text("x = f'" + "{1}" * 30_000 + "'\n")  # 6 + 90,000 + 2 bytes
    (result,) = grade(big, "one block")[0].values()
    assert result.feedback == "refused: a kernel file of 90,008 bytes; at most 65,536"


@needs_triton
@pytest.mark.parametrize("how", list(kernels.WALKS))
def test_a_loop_counting_down_scores_only_where_a_gpu_counts_it_down(tmp_path, how):
    results, report = grade(kernels.walks_down(tmp_path, how), "ragged, N ≠ Nk, fp16", "causal, fp16")
    if how in kernels.COUNTED_DOWN:
        assert report.score == report.max_score and all(t.status == "passed" for t in results.values())
        return
    lines = kernels.walks_down(tmp_path, how).read_text().split("\n")
    line = 1 + next(i for i, text in enumerate(lines) if text.startswith(f"    for start in {kernels.WALKS[how][1]}:"))
    for result in results.values():
        assert result.points == 0
        assert f"line {line}" in result.feedback and "a loop's step is -" in result.feedback, result.feedback


def test_a_compile_check_that_cannot_start_leaves_no_descriptor_open(tmp_path, monkeypatch):
    """Session 25's leftover: where Popen raised (EAGAIN, ENOMEM), both ends of the verdict's pipe stayed open."""

    def refused(*args, **kwargs):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(compile_check.subprocess, "Popen", refused)
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(BlockingIOError):
            compile_check.error(kernels.MASTER, ASSIGNMENT.grading)
    assert sorted(os.listdir("/proc/self/fd")) == before


@needs_triton
def test_a_for_s_step_is_read_from_its_text_where_the_interpreter_keeps_a_number():
    """Red team 98: a step chosen by a runtime test, unpacked from a tuple, or a loop's variable stays a Python int
    under the interpreter, where the compiler gives scf.for a negative step (TTIR checked on sm_90)."""
    from sim.grading.triton import loops

    source = """import triton
import triton.language as tl

@triton.jit
def helper(X, n, step, B: tl.constexpr):
    for i in range(n, -1, step):
        pass

@triton.jit
def kernel(X, Nk, B: tl.constexpr):
    top, s = Nk, -B
    for t in range(-B, 1 - B):
        for i in range(Nk, -1,
                       t):
            pass
    for i in range(Nk, -1, -B if Nk > 0 else B):
        pass
    for i in tl.range(Nk, -1, step=s):
        pass
    for i in range(Nk, -1, min(-B, -1)):
        pass
    for i in range(Nk, -1, -B):
        pass
    top, STEP = Nk, -B
    for i in range(top, -1, STEP):
        pass
"""
    lines = loops.sites("STEP = -16\n" + source, "kernel")  # a module constant a local shadows: the local's
    assert lines.pop(7) == {"step"}  # the helper's parameter: judged at the call that passed it
    assert lines == {13: False, 14: True, 15: True, 17: True, 19: True, 21: False, 23: False, 26: True}
