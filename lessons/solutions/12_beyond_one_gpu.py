"""Reference solutions of lesson 12's exercises (the test suite runs the lesson with these in place)."""


# %% exercise:schedule
def schedule(P):
    """held[t][p]: the shard on device p at ring step t."""
    return [[(p - t) % P for p in range(P)] for t in range(P)]


# %% exercise:ring_bytes
def ring_bytes(N, d, s, P, H):
    """Bytes one device sends in a forward ring pass."""
    return (P - 1) * 2 * (N // P) * d * s * H


# %% exercise:shortest_shard
def shortest_shard(peak, bandwidth, s):
    """Smallest n with 4·n²·d / peak ≥ 2·n·d·s / bandwidth."""
    return int(-(-s * peak // (2 * bandwidth)))  # the ceiling of s·peak / (2·bandwidth)


# %% exercise:zigzag
def zigzag(N, P):
    """[[(r0, r1), (r0, r1)], …]: the two chunks of each device."""
    c = N // (2 * P)
    return [[(p * c, (p + 1) * c), ((2 * P - 1 - p) * c, (2 * P - p) * c)] for p in range(P)]
