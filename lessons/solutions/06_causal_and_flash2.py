"""Reference solutions of lesson 6: each block replaces the exercise cell of the same name."""

# %% exercise:blocks_read
def blocks_read(i, N, Nk, Br, Bc):
    """How many K/V blocks (j = 0 … blocks_read − 1) the causal FlashAttention-2 reads for Q block i."""
    last_key = min((i + 1) * Br, N) - 1 + Nk - N  # the last key the block's last row sees
    if last_key < 0:
        return 0
    return min(-(-Nk // Bc), last_key // Bc + 1)

# %% exercise:causal_flash2_bytes
def causal_flash2_bytes(N, Nk, d, s, Br, Bc):
    """(HBM bytes read, HBM bytes written) by a causal FlashAttention-2 forward."""
    Tr = -(-N // Br)
    keys = sum(min(Nk, blocks_read(i, N, Nk, Br, Bc) * Bc) for i in range(Tr))  # K/V rows read
    rows = sum(min(Br, N - i * Br) for i in range(Tr) if blocks_read(i, N, Nk, Br, Bc))  # Q rows read: not a blind block
    return s * rows * d + 2 * s * keys * d, s * N * d + 4 * N
