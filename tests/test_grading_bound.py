"""What the grader's numbers rest on: the review line (fewer HBM bytes than any tiling flashsim knows in the test's
SRAM), checked against every block shape (a brute-force minimum over the closed forms), a submission that keeps
tiles in Python memory flagged with the figures while the honest ones are not; and inputs no submission can write."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sim.algorithms import registry
from sim.grading import bound, grader, problem, spec
from sim.grading.server import ChipServer

SUBMISSIONS = Path(__file__).parent / "grading_submissions" / "02"


def brute_force(case: dict, sram: int, backward: bool) -> int:
    """The minimum over both loop orders and every Br ≤ N, Bc ≤ Nk that fit, each closed form evaluated."""
    N, Nk, d, s = case["N"], case["Nk"], case["d"], {"fp16": 2, "bf16": 2, "fp32": 4}[case["dtype"]]
    form = registry.backward_counts if backward else registry.counts
    return min(
        form(a, N, Nk, d, s, Br, Bc, case["causal"]).hbm_bytes
        for a in ("flash1", "flash2")
        for Br in range(1, N + 1)
        for Bc in range(1, Nk + 1)
        if registry.need(a, Br, Bc, d, s, backward=backward) <= sram
    )


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("N, Nk, d, dtype, sram", [(23, 17, 8, "fp16", 4000), (12, 30, 4, "fp32", 2500)])
def test_the_bound_is_the_minimum_over_every_block_shape(N, Nk, d, dtype, sram, causal, backward):
    case = {"N": N, "Nk": Nk, "d": d, "dtype": dtype, "causal": causal}
    found = bound.fewest(case, sram, backward)
    assert found.hbm_bytes == brute_force(case, sram, backward)
    s = 2 if dtype == "fp16" else 4
    assert registry.need(found.algorithm, found.Br, found.Bc, d, s, backward=backward) <= sram
    form = registry.backward_counts if backward else registry.counts
    assert form(found.algorithm, N, Nk, d, s, found.Br, found.Bc, causal).hbm_bytes == found.hbm_bytes


def test_each_test_sram_is_the_listing_peak_itself_and_no_honest_tiling_is_below_the_bound():
    a = spec.load(spec.locate("02"))
    for t in a.tests:
        p = problem.make(a.grading, t, 7)
        assert p.sram_bytes == p.expected.sram_peak  # no slack
        assert p.fewest.hbm_bytes <= p.expected.optimum  # the listing at the test's blocks is one of the tilings


def test_tiles_kept_in_python_memory_are_flagged_for_review_with_the_figures_and_honest_ones_are_not():
    a = spec.load(spec.locate("02"))
    a = replace(a, tests=tuple(t for t in a.tests if t["check"] == "io"))
    paths = [SUBMISSIONS / "keeps_tiles_in_python.py", SUBMISSIONS / "algorithm1.py", SUBMISSIONS / "fa2_loop_order.py"]
    cheat, honest, other = grader.grade(a, paths, seed=2, jobs=2)
    p = problem.make(a.grading, a.tests[0], 2)
    N, Nk, d, s = p.case["N"], p.case["Nk"], p.case["d"], 2
    moved = s * (2 * N * d + 2 * Nk * d) + 4 * 2 * N  # Q, K, V read once; O, ℓ, m written once
    assert cheat.flags == [] and cheat.tests[0].feedback.startswith("correct, but ")  # scored on its bytes, not 0
    assert cheat.tests[0].review == (
        f"moved {moved:,} B of HBM traffic, fewer than the {p.fewest.hbm_bytes:,} B of the best tiling flashsim "
        f"knows in {p.sram_bytes:,} B of SRAM ({bound.ORDERS[p.fewest.algorithm]}, Br={p.fewest.Br}, "
        f"Bc={p.fewest.Bc}): a better schedule, or data kept outside SRAM"
    )
    assert len(cheat.reviews) == len(a.tests)
    assert honest.reviews == [] and other.reviews == [] and honest.score == a.points


def test_every_input_is_read_only_to_a_submission_and_each_run_has_its_own_copy():
    a = spec.load(spec.locate("04"))  # the backward: Q, K, V, O, dO and L are all inputs
    p = problem.make(a.grading, a.tests[0], 3)
    before = {name: x.copy() for name, x in p.inputs.items()}
    one, two = ChipServer(p.sram_bytes, p.inputs), ChipServer(p.sram_bytes, p.inputs)
    for name in p.inputs:
        one.handle({"op": "put", "buf": "x", "nbytes": 4}, [])
        one.handle({"op": "store", "tensor": name, "buf": "x", "rows": [0, 1], "cols": None}, [np.zeros((1, 1))])
        assert one.error == f"store: {name} is an input, read-only to a submission; write your results to outputs"
        one.error = None
        held = one.chip.hbm.tensors[name]
        assert held is not p.inputs[name] and held is not two.chip.hbm.tensors[name] and not held.flags.writeable
        assert np.array_equal(held, before[name]) and np.array_equal(p.inputs[name], before[name])
