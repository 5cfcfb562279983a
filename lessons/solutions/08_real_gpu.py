"""Reference solutions of lesson 8's exercises (the test suite runs the lesson with these in place)."""


# %% exercise:bench_flops
def bench_flops(n, d, batch, heads, causal):
    """Matmul FLOPs of the attention forward pass for batch × heads heads of N = Nk = n, head dim d."""
    pairs = n * n / 2 if causal else n * n  # (query, key) pairs the mask lets through, FlashAttention's convention
    return 2 * 2 * pairs * d * batch * heads  # two matmuls, 2·d FLOPs per pair each


# %% exercise:roofline
def v2_roofline_ms(row):
    """The roofline time of v2 on this row, in ms: the slower of moving its bytes and doing its FLOPs."""
    c = predicted(row)
    return 1e3 * max(c.hbm_bytes / hw.hbm_bandwidth, c.flops / hw.peak(STORAGE[row["dtype"]]))
