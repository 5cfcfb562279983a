"""Reference solutions of lesson 8's exercises (the test suite runs the lesson with these in place)."""


# %% exercise:bench_flops
def bench_flops(n, d, batch, heads, causal):
    """Matmul FLOPs of the attention forward pass for batch × heads heads of N = Nk = n, head dim d."""
    pairs = n * n / 2 if causal else n * n  # (query, key) pairs the mask lets through, FlashAttention's convention
    return 2 * 2 * pairs * d * batch * heads  # two matmuls, 2·d FLOPs per pair each


# %% exercise:roofline
def kernel_roofline_ms(row):
    """The default forward rung's roofline time on this row, in ms: the slower of moving its bytes and doing its FLOPs."""
    c = predicted(row)
    return 1e3 * max(c.hbm_bytes / hw.hbm_bandwidth, c.flops / hw.peak(STORAGE[row["dtype"]]))


# %% exercise:dq_atomics
def dq_atomic_bytes(n, nk, d, heads, Br, Bc, causal):
    """Bytes of float32 the backward's dQ atomics add at L2, over every visited tile pair of every head."""
    pairs_rows = sum(b.rows * b.seen for b in iomodel.row_blocks(n, nk, Br, Bc, causal))  # Σ_i Br_i · (blocks j seen)
    return pairs_rows * d * F * heads  # Br_i × d float32 values per visited tile pair
