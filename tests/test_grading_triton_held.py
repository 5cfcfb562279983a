"""Assignments 7–8's SRAM measure sees what a program holds however it keeps it: tiles in a tuple, a list, a dict,
a module global, an attribute of the kernel, a default argument, only inside an expression, or bitcast to
integers count as the same tiles in plain variables do (review finding F4); index arithmetic stays free."""

import importlib.util
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from grading_submissions import triton_kernels as kernels
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core.errors import InputError
from sim.core.format import human_bytes
from sim.grading import grader, spec
from sim.grading.checks import Outcome
from sim.grading.problem import make
from sim.grading.triton import allowlist, launch
from sim.grading.triton import grade as triton_grade
from sim.grading.triton.shadow import MemoryFault

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'flashsim[assignments-triton]'; Linux x86_64/aarch64 only)",
)
ASSIGNMENT = spec.load(kernels.MASTER)
TEST = "ragged, N ≠ Nk, fp16"  # several programs, fp16 ("int16 bits" bitcasts fp16)
SRAM = r"program 0 held (\d+\.\d KiB) of tiles at line \d+, over the SRAM budget of "
OUTLIVES = ("module global", "kernel attribute", "default argument")  # kept past the program's end


def kib(feedback: str) -> float:
    """The KiB an SRAM verdict says a program held."""
    return float(re.match(SRAM, feedback).group(1).split()[0])


def drawn():
    """TEST's problem as the grader draws it at seed 5."""
    return make(ASSIGNMENT.grading, next(t for t in ASSIGNMENT.tests if t["name"] == TEST), 5)


def graded(path: Path, monkeypatch):
    """`path` graded on TEST in this process, as the submission's process and the grader would: its TestResult."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    problem = drawn()
    settings = triton_grade.settings(problem, ASSIGNMENT.grading)
    results = launch.run(module, settings, [problem.inputs[n] for n in settings["inputs"]])
    return triton_grade.evaluate(ASSIGNMENT.grading, problem, Outcome("done", results=results))


def test_tiles_in_a_tuple_or_a_list_pass_both_walls_and_fail_the_sram_check(tmp_path, monkeypatch):
    paths = [kernels.hides(tmp_path, "tuple"), kernels.hides(tmp_path, "list")]
    tests = tuple(t for t in ASSIGNMENT.tests if t["name"] == TEST)
    reports = grader.grade(replace(ASSIGNMENT, tests=tests), paths, seed=5, jobs=1)  # the compile check included
    visible = kib(graded(kernels.whole_rows(tmp_path), monkeypatch).feedback)
    for report in reports:
        (result,) = report.tests
        assert result.points == 0 and kib(result.feedback) >= visible, result.feedback


@pytest.mark.parametrize("where", [w for w in kernels.HIDING if w not in OUTLIVES])
def test_tiles_kept_anywhere_count_as_the_same_tiles_in_variables(tmp_path, monkeypatch, where):
    path = kernels.hides(tmp_path, where)
    assert allowlist.check(path.read_text()) == set()  # in the language; the compiler refuses a dict
    visible = kib(graded(kernels.whole_rows(tmp_path), monkeypatch).feedback)
    result = graded(path, monkeypatch)
    assert result.points == 0 and result.status == "failed"
    if where == "no name":  # each load's result counted as it is made: K's while V's is not yet
        assert re.match(SRAM, result.feedback), result.feedback
    else:
        assert kib(result.feedback) >= visible, result.feedback  # (a container keeps both tiles to its last read)


def test_tiles_an_other_is_a_view_of_count_as_held(tmp_path, monkeypatch):
    """The hoard (16 tiles of Bc × D, D = d rounded up to a power of two) is held while the loads read the view of it
    they are given as `other` (before: left out, 100/100)."""
    case = drawn().case
    tiles = 16 * case["Bc"] * launch.block_d(case["d"]) * 2  # fp16
    feedback = graded(kernels.hoards_behind_other(tmp_path), monkeypatch).feedback
    assert kib(feedback) * 1024 >= tiles, (feedback, tiles)


@pytest.mark.parametrize("where", OUTLIVES)
def test_tiles_kept_past_the_program_fail_when_the_next_starts(tmp_path, monkeypatch, where):
    path = kernels.hides(tmp_path, where)
    first_wall = "a kernel may assign only to names|keep's defaults may only be numbers"  # red teams 83, 86
    with pytest.raises(InputError, match=first_wall):
        allowlist.check(path.read_text())
    case = drawn().case
    kept = 2 * 4 * case["Bc"] * launch.block_d(case["d"]) * 2  # K and V, four fp16 blocks each
    with pytest.raises(MemoryFault) as fault:
        graded(path, monkeypatch)
    assert str(fault.value) == (
        f"program 0 still held {human_bytes(kept)} of values when it ended (kept in a global, an attribute or a "
        f"default argument); programs share nothing but HBM"
    )


def _held():
    from sim.grading.triton.interpret import Held

    held = Held()
    held.start(0)
    return held


def _value(held, data: np.ndarray, dtype: str):
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    value = TensorHandle(data, getattr(tl, dtype))
    held.made(value)
    return value


KEPT = st.recursive(
    st.integers(0, 7),  # a leaf: array n % 4, or a transposed view of it for n ≥ 4
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


def _leaves(node) -> list[int]:
    if isinstance(node, int):
        return [node]
    return [n for child in (node.values() if isinstance(node, dict) else node) for n in _leaves(child)]


@settings(max_examples=60, deadline=None)
@given(KEPT, st.integers(0, 3000))
def test_a_value_counts_once_however_deeply_it_is_kept(kept, depth):
    held = _held()
    arrays = [np.ones((8, 4 * (i + 1)), np.float16) for i in range(4)]  # 64, 128, 192, 256 bytes

    def values(node):
        if isinstance(node, int):
            return _value(held, arrays[node % 4].T if node >= 4 else arrays[node], "float16")
        if isinstance(node, dict):
            return {k: values(v) for k, v in node.items()}
        return type(node)(values(v) for v in node)

    structure = values(kept)
    for _ in range(depth):
        structure = [structure]
    for a in arrays:
        _value(held, a, "float16")  # made and dropped at once: not held
    assert held.bytes() == sum(64 * (i + 1) for i in {n % 4 for n in _leaves(kept)})
    assert structure is not None  # alive until here


def test_index_arithmetic_is_free_and_an_integer_made_from_data_is_not():
    held = _held()
    rows = _value(held, np.arange(32, dtype=np.int32), "int32")
    held.built(rows, (0, 32))  # tl.arange: made from constants
    offsets = _value(held, rows.data[:, None] * 16 + np.arange(16, dtype=np.int32), "int32")
    held.built(offsets, (rows, rows))
    K_j = _value(held, np.ones((32, 16), np.float16), "float16")  # a load's result
    bits = _value(held, K_j.data.view(np.int16), "int16")
    held.built(bits, (K_j,))  # K_j.to(tl.int16, bitcast=True): the same 1 KiB
    assert held.bytes() == 32 * 16 * 2
    widened = _value(held, K_j.data.astype(np.int32), "int32")
    held.built(widened, (K_j,))  # K_j.to(tl.int32): 2 KiB more
    scaled = _value(held, offsets.data * 2, "int32")
    held.built(scaled, (offsets, widened))  # offsets · data: 2 KiB more
    assert held.bytes() == 32 * 16 * (2 + 4 + 4)


def test_tiles_only_dead_names_hold_are_not_held(monkeypatch):
    """A GPU frees a tile after its last use (SSA); a name still bound to it kept it counted (helper 110: 40/100)."""
    result = graded(Path(__file__).parent / "grading_submissions" / "triton_dead_names.py", monkeypatch)
    assert result.status == "passed", result.feedback


def test_the_live_names_are_those_read_before_being_bound_again():
    from sim.grading.triton.liveness import live

    source = (
        "def f(a, n):\n"  # 1
        "    k = a + 1\n"  # 2
        "    for s in range(n):\n"  # 3
        "        q = k * 2\n"  # 4
        "        k = q + s\n"  # 5
        "        v = q\n"  # 6
        "    return v\n"  # 7
    )
    table = live(source)
    assert table["f", 7] == {"v"}
    assert table["f", 6] == {"q", "k"}  # k read round the loop, q here; v bound here
    assert table["f", 5] == {"q", "s"}  # k bound here, not read: its old value is dead
    assert table["f", 4] == {"k", "s"}  # q bound here; s read below
    assert table["f", 3] == {"k", "v", "n", "range"}  # the loop's head: k read round it, v after it; n, range by it
    assert table["f", 2] == {"a", "v", "n", "range"}  # k bound here
