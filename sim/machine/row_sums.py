"""The sums over the Tr row blocks of Q that the closed forms need, in O(log) time: what `sim.machine.iomodel.row_blocks`
lists block by block, added up without listing them (so `--counts-only` answers N = 10⁹ at once).

Q block i (rows r_i = Br, the last one ragged) sees a prefix of `seen_i` K/V blocks, `keys_i` keys in them, of
which `full_i` are in blocks every row of it sees whole. With D = Nk − N (a causal mask aligned bottom-right), for
every block but the last:

    seen_i = clamp(⌊(Br·i + Br − 1 + D + Bc) / Bc⌋, 0, Tc)        (its last row sees key Br·i + Br − 1 + D)
    keys_i = Bc·seen_i, or Nk where seen_i = Tc
    full_i = Bc·clamp(⌊(Br·i + D + 1) / Bc⌋, 0, Tc)              (its first row sees key Br·i + D)

and the last block is taken as `row_blocks` takes it. Σ ⌊(a·i + b)/m⌋ is the classic floor sum (Euclid-like).
The blocks with seen_i = 0 (N > Nk: rows that see no key) are a prefix; `r_any` counts the rows of the others.
"""

from dataclasses import dataclass
from math import ceil


@dataclass(frozen=True)
class RowSums:
    """Σ over the row blocks of seen, keys and full, and of r_i times each (r_i the block's rows); r_any: Σ r_i over
    the blocks that see some key (FlashAttention-2 loads Q_i for those only)."""

    seen: int
    keys: int
    full: int
    r_seen: int
    r_keys: int
    r_full: int
    r_any: int


def row_sums(N: int, Nk: int, Br: int, Bc: int, causal: bool) -> RowSums:
    """The sums of `sim.machine.iomodel.row_blocks(N, Nk, Br, Bc, causal)`'s fields, in O(log(N + Nk)) steps."""
    Tr, Tc = ceil(N / Br), ceil(Nk / Bc)
    last = N - (Tr - 1) * Br  # rows of the last block
    if not causal:
        return RowSums(Tr * Tc, Tr * Nk, Tr * Nk, N * Tc, N * Nk, N * Nk, N)
    T, D = Tr - 1, Nk - N  # the full-size blocks i = 0 … T − 1
    seen = clamped_floor_sum(T, Br, Br - 1 + D + Bc, Bc, 0, Tc)
    capped = T - first_at_least(T, Br, Br - 1 + D + Bc, Bc, Tc)  # blocks that see every K/V block
    keys = Bc * seen - (Tc * Bc - Nk) * capped
    full = Bc * clamped_floor_sum(T, Br, D + 1, Bc, 0, Tc)
    blind = first_at_least(T, Br, Br - 1 + D + Bc, Bc, 1)  # the blocks before it see no key
    s, k, f = _last_block(N, Nk, Br, Bc, Tr, Tc)
    r_any = Br * (T - blind) + (last if s else 0)
    return RowSums(
        seen + s, keys + k, full + f, Br * seen + last * s, Br * keys + last * k, Br * full + last * f, r_any
    )


def _last_block(N: int, Nk: int, Br: int, Bc: int, Tr: int, Tc: int) -> tuple[int, int, int]:
    """(seen, keys, full) of the last row block, as `sim.machine.iomodel.row_blocks` takes them (causal)."""
    i = Tr - 1
    end = N - 1 + Nk - N  # the last key its last row sees
    seen = 0 if end < 0 else min(Tc, end // Bc + 1)
    t = i * Br + Nk - N  # the last key its first row sees
    full = Tc if t >= Nk - 1 else max(0, (t + 1) // Bc)
    return seen, min(Nk, seen * Bc), min(Nk, full * Bc)


def clamped_floor_sum(n: int, a: int, b: int, m: int, lo: int, hi: int) -> int:
    """Σ_{i=0}^{n−1} clamp(⌊(a·i + b) / m⌋, lo, hi) for a ≥ 1: lo before the floor reaches lo, hi from where it
    passes hi, the floor sum between."""
    start, stop = first_at_least(n, a, b, m, lo), first_at_least(n, a, b, m, hi + 1)
    return lo * start + floor_sum(stop - start, m, a, a * start + b) + hi * (n - stop)


def first_at_least(n: int, a: int, b: int, m: int, value: int) -> int:
    """The first i in 0 … n with ⌊(a·i + b) / m⌋ ≥ value (n where none is), for a ≥ 1."""
    return min(n, max(0, -((b - value * m) // a)))  # a·i + b ≥ value·m ⇔ i ≥ ⌈(value·m − b) / a⌉


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n−1} ⌊(a·i + b) / m⌋ for n ≥ 0, m ≥ 1 and any integers a, b (the Euclid-like reduction)."""
    total = (a // m) * (n * (n - 1) // 2) + (b // m) * n
    a, b = a % m, b % m
    while n:  # 0 ≤ a, b < m: the sum counts lattice points under a line; swap the axes and reduce again
        top = a * n + b
        if top < m:
            break
        n, b, m, a = top // m, top % m, a, m
        total += (a // m) * (n * (n - 1) // 2) + (b // m) * n
        a, b = a % m, b % m
    return total
