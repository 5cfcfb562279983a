"""Reference solutions of lesson 5: each block replaces the exercise cell of the same name."""

# %% exercise:flash2_bytes
def flash2_bytes(N, Nk, d, s, Br, Bc):
    """(HBM bytes read, HBM bytes written) by the FlashAttention-2 forward; s = bytes per stored element."""
    Tr = -(-N // Br)  # ⌈N/Br⌉ Q blocks, each streaming all of K and V; Bc does not matter
    return s * N * d + Tr * 2 * s * Nk * d, s * N * d + 4 * N

# %% exercise:flash1_bytes
def flash1_bytes(N, Nk, d, s, Br, Bc):
    """(HBM bytes read, HBM bytes written) by FlashAttention's Algorithm 1; s = bytes per stored element."""
    Tc = -(-Nk // Bc)  # ⌈Nk/Bc⌉ K/V blocks; Br does not matter
    per_pass = s * N * d + 4 * 2 * N  # O, ℓ, m: all of them, once per K/V block (and once at line 2)
    reads = 2 * s * Nk * d + Tc * (s * N * d + per_pass)  # K, V once; Q, O, ℓ, m per K/V block
    return reads, per_pass + Tc * per_pass
