"""`python -m gpu.lab.bench_variants`' packed batch (no GPU needed): lengths spread 2× below the longest, about the
bench's 16k tokens and never fewer than four sequences, so that every row has a spread to pad."""

import pytest

from gpu.lab.bench_variants import MIN_SEQUENCES, TOKENS, spread_lengths


@pytest.mark.parametrize(("n", "count"), [(4096, 5), (8192, 4), (16384, 4)])
def test_a_packed_batch_spreads_its_lengths_over_at_least_four_sequences(n, count):
    # TOKENS / (0.75 n) sequences of mean length 0.75 n: 5.3 → 5 at 4096, 2.7 → 3 and 1.3 → 1 above, raised to 4
    for d in (64, 128):
        lengths = spread_lengths(n, d)
        assert len(lengths) == count >= MIN_SEQUENCES
        assert lengths[0] == n and all(n // 2 <= x <= n for x in lengths)
    assert TOKENS == 16384
