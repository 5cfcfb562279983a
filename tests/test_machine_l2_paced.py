"""sim.machine.l2.paced: a grid's blocks on slots of their own paces, by hand; the H100's SMs' paces from stamps."""

import json

import pytest

from gpu.lab import recorded
from gpu.lab.rung7_blocks import spread
from sim.machine import l2, prediction
from sim.machine.grids import Block, Kernel
from sim.machine.hardware import H100_SXM


def _reads(*tiles):
    return Block(0, 0, 0, lambda: iter([[((t,), 1, "r")] for t in tiles]), tiles=len(tiles))


# blocks A, B, C in launch order, two steps each, 1-byte tiles: each first reads the shared tile s, then its own
KERNEL = Kernel("three", [_reads("s", "a"), _reads("s", "b"), _reads("s", "c")])


def test_a_slow_slot_leaves_a_shared_tile_for_the_next_block():
    # L2 of 2 bytes (two tiles). Paces 1 and 3 ticks a step: t = 0 A reads s (miss), B reads s (hit); t = 1 A reads a
    # (miss: [s, a]); t = 2 A is done, C takes slot 0 and reads s (hit: [a, s]); t = 3 C reads c (miss, a leaves:
    # [s, c]), then B reads b (miss, s leaves): 4 bytes from DRAM. As C starts, s and a have been read: 2
    t = l2.paced(KERNEL, [1.0, 3.0], 2, marks=(2,))
    assert t.dram_read == 4 and t.asked_read == {"s": 3, "a": 1, "b": 1, "c": 1}
    assert [m.dram_read for m in t.marks] == [2]
    # equal paces are the lockstep: t = 1 A reads a, B reads b ([a, b]: s leaves), C reads s again: 5 bytes, as play
    assert l2.paced(KERNEL, [1.0, 1.0], 2).dram_read == 5 == l2.play(KERNEL, 2, 2).dram_read


def test_the_sms_paces_spread_evenly_over_a_uniform_band():
    # spread 1%: a band of ±√3 % around 1; SM 0 at the golden-ratio sequence's 0 (1 − √3 %), SM 1 at its 0.618…
    # (1 + √3 % · 0.236…); slot 2 of 2 SMs is SM 0's again
    band = 0.01 * 3**0.5
    assert l2.paces(3, 2, 0.01) == pytest.approx([1 - band, 1 + band * (2 * 0.6180339887498949 - 1), 1 - band])


def test_the_h100s_pace_spread_is_the_recorded_sms_mean_block_times():
    record = json.loads((recorded.RESULTS_DIR / "rung7-paces-h100.json").read_text())
    spreads = sorted(spread(x["sm_means_us"]) for x in record["launches"])
    assert len(record["launches"][0]["sm_means_us"]) == H100_SXM.sm_count
    recorded_spreads = sorted(x["spread"] for x in record["launches"])  # of the means before they were stored to the ns
    assert spreads == pytest.approx(recorded_spreads, rel=1e-4)
    assert round(spreads[1], 3) == H100_SXM.sm_pace_spread  # the median of three launches: 0.60%


def test_a_paced_play_extends_from_the_stretch_between_two_heads_starts():
    # one block a head reading its two 1-byte tiles, one slot: 4 heads played (8 bytes), marks as heads 2 and 3 start
    # (4 and 6 bytes read by then): each further head adds 2, so 10 heads read 8 + 6 · 2 = 20 bytes, and ask 20
    def make(h):
        return Kernel("one a head", [Block(0, 0, 0, lambda x=x: iter([[(("T", x, i), 1, "r")] for i in (0, 1)]))
                                      for x in range(h)])  # fmt: skip

    t = prediction.traffic(make, 10, 1, 1 << 20, exact=4, pace=[1.0])
    assert (t.dram_read, t.asked_read, t.dram_write) == (20, {"T": 20}, 0)
