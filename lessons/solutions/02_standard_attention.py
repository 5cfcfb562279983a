"""Reference solutions of lesson 2, Standard attention's three round trips: each block replaces the exercise cell of its name."""


# %% exercise:standard_hbm_bytes
def standard_hbm_bytes(N: int, Nk: int, d: int, s: int) -> tuple[int, int]:
    read = s * (N * d + Nk * d)  # kernel 1: Q, K
    read += s * N * Nk  # kernel 2: S
    read += s * (N * Nk + Nk * d)  # kernel 3: P, V
    written = s * N * Nk + s * N * Nk + s * N * d  # S, P, O
    return read, written


# %% exercise:largest_n
def largest_n(d: int, s: int, heads: int, capacity: int) -> int:
    # heads · s · (2N² + 4Nd) ≤ capacity  ⇔  2N² + 4Nd − C ≤ 0 with C = capacity / (heads · s)
    C = capacity // (heads * s)
    n = int((-4 * d + math.sqrt(16 * d * d + 8 * C)) / 4)  # the positive root, rounded down
    while 2 * (n + 1) ** 2 + 4 * (n + 1) * d <= C:  # correct the float root's rounding
        n += 1
    while n > 0 and 2 * n**2 + 4 * n * d > C:
        n -= 1
    return n
