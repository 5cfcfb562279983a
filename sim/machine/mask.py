"""Which keys a query sees: the causal mask and the sliding window, one rule aligned bottom-right.

Query position p (of N) and key c (of Nk) meet at the diagonal c = p + Nk − N (FlashAttention ≥ 2.1).
A window (left, right) lets p see the keys p + Nk − N − left … p + Nk − N + right; a side of None is
unbounded. Causal is the window (None, 0); causal with a window takes right = min(right, 0). With GQA's
packed schedule `group` query heads share one K/V head and their rows are interleaved, row r being
position r // group of head r % group. The listings, the closed forms and the references ask this rule.
"""

from dataclasses import dataclass
from math import ceil

import numpy as np

from sim.machine.row_sums import clamped_floor_sum, first_at_least


@dataclass(frozen=True)
class Rule:
    """The keys each query row sees: [p + Nk − N − left, p + Nk − N + right] ∩ [0, Nk), p the row's position."""

    N: int  # query positions
    Nk: int  # keys
    left: int | None = None  # None: unbounded
    right: int | None = None
    group: int = 1  # query rows per position (GQA's packed schedule)

    @property
    def masks(self) -> bool:
        """Whether any key is hidden from any row (causal or a window)."""
        return self.left is not None or self.right is not None

    def bounds(self, p):
        """The first and last key position p may see (either may fall outside 0 … Nk − 1), as floats (±∞)."""
        diagonal = np.asarray(p) + self.Nk - self.N
        lo = -np.inf if self.left is None else diagonal - self.left
        hi = np.inf if self.right is None else diagonal + self.right
        return lo, hi

    def positions(self, rows: tuple[int, int]) -> tuple[int, int]:
        """The first and last query position among rows r0 … r1 − 1."""
        return rows[0] // self.group, (rows[1] - 1) // self.group

    def visible(self, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """Which keys c0 … c1 − 1 each row r0 … r1 − 1 sees, as a (r1 − r0, c1 − c0) bool array."""
        lo, hi = self.bounds(np.arange(*rows)[:, None] // self.group)
        c = np.arange(*cols)[None, :]
        return (c >= lo) & (c <= hi)

    def block_seen(self, rows: tuple[int, int], cols: tuple[int, int]) -> bool:
        """Whether some row of the block sees some key of it (lo and hi both grow with the row, hi − lo ≥ 0)."""
        p0, p1 = self.positions(rows)
        return bool(self.bounds(p1)[1] >= cols[0] and self.bounds(p0)[0] <= cols[1] - 1)

    def block_fully_seen(self, rows: tuple[int, int], cols: tuple[int, int]) -> bool:
        """Whether every row of the block sees every key of it: no mask is needed there."""
        p0, p1 = self.positions(rows)
        return bool(self.bounds(p0)[1] >= cols[1] - 1 and self.bounds(p1)[0] <= cols[0])

    def seen_blocks(self, rows: tuple[int, int], Bc: int) -> range:
        """The K/V blocks j (of Bc keys) some row of the block sees: a run j0 … j1 − 1, found in O(1)."""
        Tc = -(-self.Nk // Bc)
        p0, p1 = self.positions(rows)
        lo, hi = self.bounds(p0)[0], self.bounds(p1)[1]
        if hi < 0 or lo > self.Nk - 1:
            return range(0)
        return range(max(0, int(lo // Bc)) if lo > 0 else 0, min(Tc, int(hi // Bc) + 1) if hi < self.Nk else Tc)

    def full_blocks(self, rows: tuple[int, int], Bc: int) -> range:
        """The K/V blocks every row of the block sees in full: a run inside `seen_blocks`."""
        Tc = -(-self.Nk // Bc)
        p0, p1 = self.positions(rows)
        lo, hi = self.bounds(p1)[0], self.bounds(p0)[1]  # c0 ≥ lo and c1 − 1 ≤ hi
        j0 = 0 if lo <= 0 else int(-(-lo // Bc))
        j1 = Tc if hi >= self.Nk - 1 else (int(hi + 1) // Bc if hi >= 0 else 0)
        return range(j0, max(j0, j1))

    def hide(self, chip, S: np.ndarray, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """The tile S with −∞ where a key is hidden, the select booked on `chip` as elementwise work; a tile
        every row sees in full is returned as it is, at no cost."""
        if self.block_fully_seen(rows, cols):
            return S
        chip.elementwise(S.size)
        return np.where(self.visible(rows, cols), S, -np.inf)


def rule(N: int, Nk: int, causal: bool = False, window=None, group: int = 1) -> Rule:
    """The Rule of a causal flag and a window (left, right) whose sides are ints ≥ 0, or −1 / None (unbounded)."""
    left, right = (None, None) if window is None else (None if w is None or w == -1 else int(w) for w in window)
    if causal:
        right = 0 if right is None else min(right, 0)
    return Rule(N, Nk, left, right, group)


def window_share(n: int, nk: int, Br: int, Bc: int, causal: bool, window) -> float:
    """The share of the tile pairs a run visits that a window leaves it (1 without one): what the window saves of a
    listing's time (`flashsim run`'s estimate refused N = 32,768 with a window of 128 as 1 min; it takes seconds)."""
    if window is None:
        return 1.0
    return visited(rule(n, nk, causal, window), Br, Bc) / max(1, visited(rule(n, nk, causal), Br, Bc))


def visited(r: Rule, Br: int, Bc: int) -> int:
    """Σ len(r.seen_blocks) over the row blocks of Br rows (a Rule of group 1): the tile pairs a run visits, in
    O(log(N + Nk)) steps by `row_sums`' floor sums (a block loop never ended at N = 2⁵³), the ragged last block
    taken as it is. Block i < T sees blocks ⌊lo_i / Bc⌋ … ⌊hi_i / Bc⌋, clamped to 0 … Tc − 1, with
    lo_i = Br·i + Nk − N − left and hi_i = Br·i + Br − 1 + Nk − N + right, none from where lo_i passes the last key."""
    T, Tc, D = ceil(r.N / Br) - 1, ceil(r.Nk / Bc), r.Nk - r.N  # blocks 0 … T − 1 hold Br rows each
    last = len(r.seen_blocks((T * Br, r.N), Bc))
    live = T if r.left is None else first_at_least(T, Br, D - r.left, 1, r.Nk)
    starts = 0 if r.left is None else clamped_floor_sum(live, Br, D - r.left, Bc, 0, Tc)
    ends = Tc * live if r.right is None else clamped_floor_sum(live, Br, Br - 1 + D + r.right + Bc, Bc, 0, Tc)
    return ends - starts + last


def visible(r0: int, r1: int, c0: int, c1: int, N: int, Nk: int) -> np.ndarray:
    """The causal mask of keys c0…c1−1 for queries r0…r1−1, as a (r1 − r0, c1 − c0) bool array."""
    return rule(N, Nk, causal=True).visible((r0, r1), (c0, c1))


def block_seen(r1: int, c0: int, N: int, Nk: int) -> bool:
    """Whether any query of a block ending at row r1 sees any key of a block starting at column c0 (causal)."""
    return rule(N, Nk, causal=True).block_seen((r1 - 1, r1), (c0, c0 + 1))


def block_fully_seen(r0: int, c1: int, N: int, Nk: int) -> bool:
    """Whether every query of a block starting at row r0 sees every key of a block ending at column c1 (causal)."""
    return rule(N, Nk, causal=True).block_fully_seen((r0, r0 + 1), (c1 - 1, c1))


def hide(chip, S: np.ndarray, rows: tuple[int, int], cols: tuple[int, int], N: int, Nk: int) -> np.ndarray:
    """The causal mask on the tile S for `rows` × `cols` (see `Rule.hide`)."""
    return rule(N, Nk, causal=True).hide(chip, S, rows, cols)
