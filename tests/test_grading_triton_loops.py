"""Assignments 7–8: a helper's loop counting down by a step its caller passed is graded as a GPU would run it.

Triton compiles a helper again for each set of constexprs its caller passes: `walk(X, top, -BLOCK)`
keeps the step a constexpr and the loop counts down; `walk(X, top, s)`, s a loop's variable or a
local, gives the GPU's loop a runtime step below zero, which runs no iteration there, though the
interpreter hands both over as Python numbers. The kernels are launched as the grader does, on shadow memory.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'flashsim[assignments-triton]'; Linux x86_64/aarch64 only)",
)
N, BLOCK = 40, 4
SOURCE = """import triton
import triton.language as tl


@triton.jit
def walk(X, top, step):
    i = 0.0
    for k in range(top, -1, step):
        tl.store(X + k, i)
        i += 1.0


@triton.jit
def forward(X, top, by):
    walk(X, top, by)


@triton.jit
def loop_variable(X, n, BLOCK: tl.constexpr):
    for s in range(-BLOCK, -BLOCK - 1, -1):
        walk(X, n - 1, s)


@triton.jit
def keyword(X, n, BLOCK: tl.constexpr):
    for s in range(-BLOCK, -BLOCK - 1, -1):
        walk(X, step=s, top=n - 1)


@triton.jit
def forwarded(X, n, BLOCK: tl.constexpr):
    for s in range(-BLOCK, -BLOCK - 1, -1):
        forward(X, n - 1, s)


@triton.jit
def unpacked(X, n, BLOCK: tl.constexpr):
    top, s = n - 1, -BLOCK
    walk(X, top, s)


@triton.jit
def one_line(X, n, BLOCK: tl.constexpr):
    for s in range(-BLOCK, -BLOCK - 1, -1):
        walk(X, n - 1, -BLOCK); walk(X, n - 1, s)


@triton.jit
def mapping(X, n, BLOCK: tl.constexpr):
    for s in range(-BLOCK, -BLOCK - 1, -1):
        walk(X, n - 1, **{"step": s})


@triton.jit
def constant(X, n, BLOCK: tl.constexpr):
    walk(X, n - 1, -BLOCK)


@triton.jit
def literal(X, n, BLOCK: tl.constexpr):
    walk(X, n - 1, -16)


@triton.jit
def keyword_constant(X, n, BLOCK: tl.constexpr):
    walk(X, step=-BLOCK, top=n - 1)


@triton.jit
def forwarded_constant(X, n, BLOCK: tl.constexpr):
    forward(X, n - 1, 2 * -BLOCK)
"""
# each refused kernel → the line of its call that passes the runtime value; each counted one → its step
REFUSED = {"loop_variable": 21, "keyword": 27, "forwarded": 33, "unpacked": 39, "one_line": 45, "mapping": 51}
COUNTED = {"constant": BLOCK, "literal": 16, "keyword_constant": BLOCK, "forwarded_constant": 2 * BLOCK}


def run(path: Path, name: str) -> np.ndarray:
    """`path`'s kernel `name` (imported under TRITON_INTERPRET=1) launched on one program as the grader launches it,
    X (N, float32) starting at -1: X."""
    from sim.grading.triton import interpret
    from sim.grading.triton.shadow import Buffer

    spec = importlib.util.spec_from_file_location("walks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = Buffer("X", np.full(N, -1.0, np.float32))
    interpret.launch(getattr(module, name), (1,), [x], [N], {"BLOCK": BLOCK}, str(path))
    return x.values


def launched(tmp_path, monkeypatch, name: str) -> np.ndarray:
    """SOURCE's kernel `name` run in this process: X."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (path := tmp_path / "walks.py").write_text(SOURCE)
    return run(path, name)


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_runtime_value_a_caller_passes_a_helper_as_its_step_is_refused_at_the_call(tmp_path, monkeypatch, name):
    assert SOURCE.split("\n")[REFUSED[name] - 1].lstrip().startswith(("walk(", "forward("))
    message = f"a loop's step is -{BLOCK} when the kernel runs and is not a constant where the `for` stands "
    message += f"(line {REFUSED[name]} passes it a value known only at run time): a GPU runs such a loop no time"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        launched(tmp_path, monkeypatch, name)


@pytest.mark.parametrize("name", list(COUNTED))
def test_a_constant_a_caller_passes_a_helper_as_its_step_counts_down(tmp_path, monkeypatch, name):
    step = COUNTED[name]
    expected = np.full(N, -1.0)  # float64: the k-th index from N - 1 down by `step` holds k
    for k, index in enumerate(np.arange(N - 1, -1, -step)):
        expected[index] = k
    np.testing.assert_array_equal(launched(tmp_path, monkeypatch, name).astype(np.float64), expected)


def test_without_columns_a_line_s_calls_are_refused_only_where_every_one_passes_a_runtime_value(tmp_path):
    """PYTHONNODEBUGRANGES: a frame's position holds its line alone, so every call of the helper on it is a candidate;
    one_line's constant call would keep its runtime neighbour from being refused (the gap loops.py names), but that
    one passes a loop's variable, which arrives as a tensor (`induction`) and is refused by its value."""
    (path := tmp_path / "walks.py").write_text(SOURCE)
    tests = Path(__file__).parent
    script = (
        f"import sys; sys.path[:0] = [{str(tests)!r}, {str(tests.parent)!r}]\n"
        "from test_grading_triton_loops import run\n"
        "for name in ('one_line', 'loop_variable'):\n"
        "    try:\n"
        f"        run({str(path)!r}, name); print(name, 'ran')\n"
        "    except ValueError as e:\n"
        "        print(name, str(e).split(':')[0])\n"
    )
    env = {**os.environ, "PYTHONNODEBUGRANGES": "1", "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    refused = f"a loop's step is -{BLOCK} when the kernel runs and is not a constant where the `for` stands"
    assert out.stdout.split("\n")[:2] == [
        f"one_line {refused}",
        f"loop_variable a loop's step is -{BLOCK} when the kernel runs and is not a constant where the `for` stands "
        f"(line {REFUSED['loop_variable']} passes it a value known only at run time)",
    ], out.stderr
