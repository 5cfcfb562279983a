"""Reference solutions of lesson 11: each block replaces the exercise cell of the same name."""

# %% exercise:kv_read_bytes
def kv_read_bytes(B, Hq, Hkv, N, Nk, d, s, Br, packed):
    """Bytes of K and V a FlashAttention-2 forward reads, for either GQA schedule."""
    g = Hq // Hkv
    programs, rows = (B * Hkv, g * N) if packed else (B * Hq, N)
    return programs * -(-rows // Br) * 2 * Nk * d * s

# %% exercise:window_tiles
def window_tiles(N, B, w):
    """Tiles (Q block, K/V block) a FlashAttention-2 forward computes with the window (w, 0)."""
    return sum(i - max(0, i - w // B) + 1 for i in range(N // B))

# %% exercise:through_softcap
def through_softcap(dS, S, c):
    """dL/dS for scores capped as c·tanh(S/c), given dL/d(c·tanh(S/c))."""
    return dS * (1 - np.tanh(S / c) ** 2)

# %% exercise:padded_rows
def padded_rows(lengths):
    """Rows of padding when the batch is padded to its longest sequence."""
    return int(len(lengths) * max(lengths) - sum(lengths))

# %% exercise:paged_reads
def paged_reads(n, P, d, s):
    """(K and V bytes, block-table bytes) one split of Flash-Decoding reads from a paged cache."""
    return 2 * n * d * s, 4 * -(-n // P)
