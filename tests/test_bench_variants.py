"""`python -m gpu.lab.bench_variants`' packed batch (no GPU needed): lengths spaced evenly from the longest N down to
N/2 (a 2× spread), about the bench's 16k tokens and never fewer than four sequences, so that every row pads by 4/3."""

import pytest

from gpu.lab.bench_variants import MIN_SEQUENCES, TOKENS, spread_lengths

# by hand: count = max(4, round(16384 / (0.75 N))) — 5.3 → 5 at 4096, 2.7 → 3 and 1.3 → 1 above, raised to 4 —
# then N − i · (N/2) / (count − 1)
SPACED = {
    4096: [4096, 3584, 3072, 2560, 2048],
    8192: [8192, 6827, 5461, 4096],  # 4096/3 = 1365.33 a step
    16384: [16384, 13653, 10923, 8192],  # 8192/3 = 2730.67 a step
}


@pytest.mark.parametrize("n", sorted(SPACED))
def test_a_packed_batch_spreads_its_lengths_2x_over_at_least_four_sequences(n):
    lengths = spread_lengths(n)
    assert lengths == SPACED[n]
    assert len(lengths) >= MIN_SEQUENCES and max(lengths) == 2 * min(lengths) == n
    assert len(lengths) * n / sum(lengths) == pytest.approx(4 / 3, abs=1e-4)  # what padding to the longest costs
    assert TOKENS == 16384
