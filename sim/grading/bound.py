"""The fewest HBM bytes any tiling flashsim knows can move with a test's SRAM: the review line for a submission
that moves fewer (it found a better schedule, or it kept tiles outside its SRAM, which only the numbers show).

The minimum runs over both loop orders (Algorithm 1's K/V-outer listing, FlashAttention-2's Q-outer one, each
with its own SRAM footprint) and every block shape Br × Bc that fits. Every closed form moves no more bytes as
Bc grows (fewer K/V passes, or fewer keys seen by a causal Q block: monotone in Bc), except FlashAttention-2's
causal forward, which moves no fewer (its blocks round the keys a row sees up to Bc); so for each Br the
minimum is at Bc = 1 or at the largest Bc that fits, and Br runs over every value.
"""

from dataclasses import dataclass

from sim.algorithms import registry
from sim.core.dtypes import itemsize
from sim.core.format import count

ORDERS = {"flash1": "Algorithm 1's K/V-outer order", "flash2": "FlashAttention-2's Q-outer order"}


@dataclass(frozen=True)
class Bound:
    """The fewest bytes, and the tiling that moves them."""

    hbm_bytes: int
    algorithm: str
    Br: int
    Bc: int

    def review(self, booked: int, sram_bytes: int) -> str:
        """The line for a submission that moved `booked` bytes, fewer than this."""
        return (
            f"moved {count(booked)} B of HBM traffic, fewer than the {count(self.hbm_bytes)} B of the best tiling "
            f"flashsim knows in {count(sram_bytes)} B of SRAM ({ORDERS[self.algorithm]}, Br={self.Br}, Bc={self.Bc}): "
            "a better schedule, or data kept outside SRAM"
        )


def fewest(case: dict, sram_bytes: int, backward: bool) -> Bound | None:
    """The lower bound for a drawn case (N, Nk, d, dtype, causal) with `sram_bytes` of SRAM; None if no tiling fits."""
    N, Nk, d, s, causal = case["N"], case["Nk"], case["d"], itemsize(case["dtype"]), case["causal"]
    form = registry.backward_counts if backward else registry.counts
    best = None
    for algorithm in ORDERS:
        for Br in range(1, N + 1):
            top = _largest_bc(algorithm, Br, Nk, d, s, sram_bytes, backward)
            for Bc in {1, top} if top else ():
                moved = form(algorithm, N, Nk, d, s, Br, Bc, causal).hbm_bytes
                if best is None or moved < best.hbm_bytes:
                    best = Bound(moved, algorithm, Br, Bc)
    return best


def _largest_bc(algorithm: str, Br: int, Nk: int, d: int, s: int, sram_bytes: int, backward: bool) -> int:
    """The largest Bc ≤ Nk whose buffers fit beside Br rows (0 if not even Bc = 1 does): a bisection, the
    footprint growing with Bc."""

    def fits(Bc: int) -> bool:
        return registry.need(algorithm, Br, Bc, d, s, backward=backward) <= sram_bytes

    if not fits(1):
        return 0
    lo, hi = 1, Nk
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo
