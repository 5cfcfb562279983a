"""Reference solutions of lesson 10's exercises (the test suite runs the lesson with these in place)."""


# %% exercise:waves
def waves(blocks, sms, blocks_per_sm):
    """How many waves a grid of `blocks` equal thread blocks runs in on `sms` SMs holding `blocks_per_sm` each."""
    slots = sms * blocks_per_sm
    return -(-blocks // slots)  # ⌈blocks / slots⌉


# %% exercise:dram_fits
def dram_read_when_it_fits(n, d, s, heads):
    """DRAM bytes read by FlashAttention-2's forward when every head resident at once keeps its K and V in L2."""
    return 3 * n * d * s * heads  # Q, K and V once; O and L are written


# %% exercise:exp_ratio
def exp_over_matmul(d, tensor_per_clock=4096, mufu_per_clock=16):
    """The exponentials' time over the matmuls' time in FlashAttention's forward, per score S_ij."""
    return (1 / mufu_per_clock) / (4 * d / tensor_per_clock)
