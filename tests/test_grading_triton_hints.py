"""Assignments 7–8: Triton's hints, which a GPU trusts and the interpreter ignores, are checked while the grader
interprets: a false `tl.multiple_of` (red team 106: 100/100 interpreted, `misaligned address` on an H200) is
refused in one line, true ones pass."""

import importlib.util
from dataclasses import replace

import numpy as np
import pytest
from grading_submissions import triton_kernels as kernels

from sim.grading import grader, spec

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (pip install 'flashsim[assignments-triton]'; Linux x86_64/aarch64 only)",
)
ASSIGNMENT = spec.load(kernels.MASTER)
KEYS = "        keys = start + tl.arange(0, BLOCK_N)\n"
HINTED = "        keys = tl.max_contiguous(tl.multiple_of(tl.multiple_of(start, BLOCK_N) + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)\n"  # fmt: skip
LYING = "    i = tl.program_id(0)\n    d = tl.multiple_of(tl.maximum(d, 1), 16)\n"


@pytest.mark.parametrize(
    "kind, data, step, values, why",
    [
        ("multiple_of", np.arange(0, 64), 1, [64], ""),
        ("multiple_of", np.arange(3, 67), 1, [64], "3 starts a run and is not a multiple of 64"),
        ("multiple_of", np.array([0, 1, 2, 3, 16, 17, 40, 41]), 1, [8], ""),
        ("multiple_of", np.array([0, 1, 2, 3, 16, 17, 36, 37]), 1, [8], "36 starts a run and is not a multiple of 8"),
        ("multiple_of", np.array(36), 1, [16], "36 is not a multiple of 16"),
        ("multiple_of", np.array(32), 1, [16], ""),
        ("multiple_of", np.array([[0, 2, 4], [32, 34, 36]]), 2, [1, 32], ""),  # fp16 addresses: runs a row each
        ("multiple_of", np.array([[2, 4, 6], [32, 34, 36]]), 2, [1, 32], "2 starts a run and is not a multiple of 32"),
        ("multiple_of", np.array([[0, 2, 4], [32, 34, 36]]), 2, [32, 1], "2 starts a run and is not a multiple of 32"),
        ("max_contiguous", np.array([0, 1, 2, 3, 8, 9, 10, 11]), 1, [4], ""),
        ("max_contiguous", np.array([0, 1, 2, 3, 8, 9, 10, 11]), 1, [8],
         "the values along dimension 0 are not runs of 8 consecutive ones"),
        ("max_contiguous", np.arange(6), 1, [4], "6 values along dimension 0 are not runs of 4"),
        ("max_contiguous", np.array([0, 4, 8, 12]), 4, [4], ""),  # fp32 addresses
        ("max_constancy", np.array([5, 5, 5, 5, 7, 7, 7, 7]), 1, [4], ""),
        ("max_constancy", np.array([5, 5, 5, 6, 7, 7, 7, 7]), 1, [4],
         "the values along dimension 0 are not runs of 4 equal ones"),
    ],
)  # fmt: skip
def test_a_hint_is_false_exactly_where_its_definition_fails(kind, data, step, values, why):
    from sim.grading.triton.hints import _false

    assert _false(kind, data, step, values) == why


def test_true_hints_pass_and_a_false_one_is_refused_when_graded(tmp_path):
    paths = [
        kernels.edit(tmp_path, "hinted", KEYS, HINTED),
        kernels.edit(tmp_path, "lying", "    i = tl.program_id(0)\n", LYING),
    ]
    tests = tuple(t for t in ASSIGNMENT.tests if t["name"] == "ragged, N ≠ Nk, fp16")  # d drawn from [10, 40]
    hinted, lying = grader.grade(replace(ASSIGNMENT, tests=tests), paths, seed=3, jobs=1)
    assert hinted.tests[0].status == "passed", hinted.tests[0].feedback
    d = kernels.shape(lying.tests[0])["d"]
    assert d % 16, d  # the seed's d: the hint is false
    assert lying.tests[0].points == 0 and lying.tests[0].feedback.startswith(
        f"raised ValueError: tl.multiple_of(…, 16) is false here: {d} is not a multiple of 16; a GPU trusts it"
    ), lying.tests[0].feedback
