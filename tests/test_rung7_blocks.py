"""gpu.lab.rung7_blocks: the line through a wave's cycles, and the preset's block_clocks from the H100's recording."""

import json

import pytest

from gpu.lab import recorded
from gpu.lab.rung7_blocks import block_clocks, fit, line
from sim.machine.hardware import H100_SXM


def test_the_line_through_points_on_a_line_is_that_line():
    # y = 1 + 2x at x = 1, 2, 3 (3, 5, 7): intercept 1, slope 2; with y = 3, 5, 8 the mean is (2, 16/3), the slope
    # Σ(x − 2)(y − 16/3) / Σ(x − 2)² = ((−1)(−7/3) + 0 + (1)(8/3)) / 2 = 5/2, the intercept 16/3 − 5 = 1/3
    assert line([1, 2, 3], [3, 5, 7]) == pytest.approx((1, 2))
    assert line([1, 2, 3], [3, 5, 8]) == pytest.approx((1 / 3, 5 / 2))


def test_the_preset_block_clocks_are_the_recordings_intercepts_less_launch_and_fill():
    record = json.loads((recorded.RESULTS_DIR / "rung7-blocks-h100.json").read_text())
    lines = fit(record)
    # each shape's medians lie near the line (the step's cost is a constant): within 2,500 of 29,000–293,000 cycles
    assert all(abs(s["residual"]) < 2500 for d in lines.values() for s in d["shapes"])
    # one step's shared-memory wavefronts are the model's per tile pair (3208 at d = 64, 3140 at d = 128: sim.machine
    # timing's SRAM bytes / 128) within 5%
    assert lines["64"]["step_wavefronts"] == pytest.approx(3208, rel=0.05)
    assert lines["128"]["step_wavefronts"] == pytest.approx(3140, rel=0.05)
    assert {k: round(v) for k, v in block_clocks(record, H100_SXM).items()} == H100_SXM.block_clocks
