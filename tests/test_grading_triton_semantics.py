"""Assignments 7–8: a loop's variable and a block's truth are graded as Triton compiles them (red team 106).

A `range`/`tl.range` loop's variable is an i32 on a GPU: `//` truncates toward zero, `%` takes the
dividend's sign, `+` wraps. A block's truth is not defined there: `max`/`min`/`not`/`and` of blocks are
elementwise, where the interpreter took every block as True. The kernels are launched as the grader does,
on shadow memory; the references are written from C's integer semantics.
"""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from grading_submissions import triton_kernels as kernels
from test_grading_triton import grade

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'flashsim[assignments-triton]'; Linux x86_64/aarch64 only)",
)
n, BLOCK, COLUMNS = 9, 4, 8
SOURCE = """import triton
import triton.language as tl


@triton.jit
def arithmetic(X, n, BLOCK: tl.constexpr):
    for k in range(-n, n):
        row = X + (k + n) * 8
        tl.store(row, k // BLOCK)
        tl.store(row + 1, k % BLOCK)
        tl.store(row + 2, (k + 2147483640) > 0)
        s = k * 0
        for j in range(k, k + 2):
            s += j
        tl.store(row + 3, s)
        if k > 0:
            tl.store(row + 6, 1)
        else:
            tl.store(row + 6, -1)
        tl.store(row + 7, max(k, 0))
    for k in tl.range(-n, n, 2):
        tl.store(X + (k + n) * 8 + 4, (k - 1) // BLOCK)
    for k in tl.static_range(-3, 3):
        tl.store(X + (k + n) * 8 + 5, k // 2)


@triton.jit
def past_i32(X, n, BLOCK: tl.constexpr):
    for k in range(2147483647 - 40, 2147483647, 16):
        tl.store(X, k)


@triton.jit
def maxed(X, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a, b = tl.load(X + i), tl.load(X + BLOCK + i)
    tl.store(X + 2 * BLOCK + i, max(a, b))


@triton.jit
def minned(X, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a, b = tl.load(X + i), tl.load(X + BLOCK + i)
    tl.store(X + 2 * BLOCK + i, min(a, b))


@triton.jit
def negated(X, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a, b = tl.load(X + i), tl.load(X + BLOCK + i)
    tl.store(X + 2 * BLOCK + i, tl.where(not (a > b), a, b))


@triton.jit
def conjoined(X, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    a, b = tl.load(X + i), tl.load(X + BLOCK + i)
    tl.store(X + 2 * BLOCK + i, tl.where((a > 0) and (b > 0), a, b))
"""
A, B = np.array([1.0, -2.0, 3.0, -4.0]), np.array([-1.0, 2.0, 0.5, -5.0])  # BLOCK values each
ELEMENTWISE = {"maxed": np.maximum(A, B), "minned": np.minimum(A, B), "negated": np.where(~(A > B), A, B),
               "conjoined": np.where((A > 0) & (B > 0), A, B)}  # fmt: skip


def c_div(a: int, b: int) -> int:
    """C's (and LLVM's sdiv) quotient: truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def c_rem(a: int, b: int) -> int:
    """C's (and LLVM's srem) remainder: the dividend's sign."""
    return a - b * c_div(a, b)


def i32(v: int) -> int:
    """v wrapped to a 32-bit two's complement integer."""
    return (v + 2**31) % 2**32 - 2**31


def arithmetic() -> np.ndarray:
    """What `arithmetic` writes on a GPU, row k + n for k in [-n, n), NaN where it writes nothing."""
    out = np.full((2 * n, COLUMNS), np.nan)
    for k in range(-n, n):
        out[k + n, [0, 1, 2, 3, 6, 7]] = [c_div(k, BLOCK), c_rem(k, BLOCK), i32(k + 2147483640) > 0, 2 * k + 1,
                                          1 if k > 0 else -1, max(k, 0)]  # fmt: skip
    for k in range(-n, n, 2):
        out[k + n, 4] = c_div(k - 1, BLOCK)
    for k in range(-3, 3):  # tl.static_range: constexprs, which Python's floor divides (unrolled, never an i32)
        out[k + n, 5] = k // 2
    return out


def launched(tmp_path, monkeypatch, name: str, values: np.ndarray) -> np.ndarray:
    """SOURCE's kernel `name` launched as the grader launches it, on one program, X (float32) holding `values`: X."""
    from sim.grading.triton import interpret
    from sim.grading.triton.shadow import Buffer

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (path := tmp_path / "semantics.py").write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("semantics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = Buffer("X", values.astype(np.float32))
    interpret.launch(getattr(module, name), (1,), [x], [n], {"BLOCK": BLOCK}, str(path))
    return x.values.astype(np.float64)


def test_a_loop_variable_divides_and_wraps_as_the_gpu_s_i32(tmp_path, monkeypatch):
    """//, %, + of a range's and a tl.range's variable, as a bound, a condition, in max(): C's i32 semantics."""
    got = launched(tmp_path, monkeypatch, "arithmetic", np.full((2 * n, COLUMNS), np.nan))
    np.testing.assert_array_equal(got.reshape(2 * n, COLUMNS), arithmetic())


def test_a_loop_past_the_i32_it_counts_in_is_refused(tmp_path, monkeypatch):
    message = "a loop from 2147483607 to 2147483647 by 16 leaves the int32 a GPU counts it in (its bounds' type)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        launched(tmp_path, monkeypatch, "past_i32", np.zeros(1))


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_the_truth_of_a_block_is_refused_with_what_to_write(tmp_path, monkeypatch, name):
    message = f"the truth of a block of {BLOCK} values is not defined on a GPU (the interpreter would take it as True)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}: use tl.maximum/tl.minimum for max"):
        launched(tmp_path, monkeypatch, name, np.concatenate([A, B, np.full(BLOCK, np.nan)]))


V_J = kernels.V_LOAD
O_I = next(line for line in kernels.MASTER.read_text().splitlines(True) if line.rstrip().endswith("# line 12"))
TRICKS = {  # red team 106's submissions: a line after V_j's load (in the loop) or after O_i's division
    "floor division": (V_J, "        V_j = V_j * (1 - ((start - 1) // BLOCK_N - start // BLOCK_N + 1))\n"),
    "remainder": (V_J, "        V_j = V_j * (((start - 1) % BLOCK_N) >= 0)\n"),
    "overflow": (V_J, "        V_j = V_j * ((start + 2147483616) > 0)\n"),
    "max": (O_I, "    O_i = max(O_i + 1.0, O_i)\n"),
    "min": (O_I, "    O_i = min(O_i - 1.0, O_i)\n"),
    "not": (O_I, "    O_i = tl.where(not (rows[:, None] < 0), O_i * 3.0, O_i)\n"),
}


@pytest.mark.parametrize("trick", list(TRICKS))
def test_red_team_106_s_kernels_are_graded_as_a_gpu_runs_them(tmp_path, trick):
    """The loop's tricks zero V_j in the first K/V block on a GPU (start = 0: (0 - 1) // B = 0, (0 - 1) % B = -1) or
    past start = 32 (i32 wraps): O is wrong there; the block tricks are refused at their line."""
    after, added = TRICKS[trick]
    path = kernels.edit(tmp_path, trick.replace(" ", "_"), after, after + added)
    results, report = grade(path, "ragged, N ≠ Nk, fp16")
    (result,) = results.values()
    assert report.score == 0 and result.status == "failed", result.feedback
    line = 1 + path.read_text()[: path.read_text().index(added)].count("\n")
    if trick in ("max", "min", "not"):
        assert result.feedback.startswith("raised ValueError: the truth of a block of ") and f"line {line}" in (
            result.feedback
        ), result.feedback
    else:
        assert re.match(r"O\[\d+, \d+\] is .* where the reference is", result.feedback), result.feedback


def source(tmp_path: Path) -> Path:
    """SOURCE written to tmp_path (for the GPU test)."""
    (path := tmp_path / "semantics.py").write_text(SOURCE)
    return path
