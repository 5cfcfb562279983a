"""How many SMs Flash-Decoding's thread blocks keep busy, and the time that gives both of its kernels."""

from dataclasses import dataclass
from math import ceil

from sim.machine.hardware import Hardware
from sim.machine.iomodel import decoding


@dataclass(frozen=True)
class Occupancy:
    """Thread blocks of kernel 1 against the SMs, and the time the model gives both kernels."""

    splits: int
    blocks: int  # batch × heads × splits thread blocks
    sm_count: int
    busy: int  # SMs with a block in the first wave
    waves: int  # ⌈blocks / SMs⌉
    hbm_bytes: int  # both kernels, every head
    seconds: float

    @property
    def utilization(self) -> float:
        """Fraction of SM-time that does work: blocks / (waves × SMs)."""
        return self.blocks / (self.waves * self.sm_count)


def occupancy(
    batch: int, heads: int, splits: int, Nq: int, Nk: int, d: int, s: int, hw: Hardware, Bc: int | None = None
) -> Occupancy:
    """The model: each thread block streams its chunk at one SM's share of the HBM bandwidth
    (bandwidth / SM count: all SMs busy together saturate HBM); blocks run in waves of one per
    SM; the combine kernel is memory-bound at full bandwidth.
    """
    (_, split), *merge = decoding(Nq, Nk, d, s, Bc or Nk, splits)
    blocks = batch * heads * splits
    waves = ceil(blocks / hw.sm_count)
    per_block = split.hbm_bytes / splits  # what one thread block moves (chunks differ by at most one key)
    seconds = waves * per_block / (hw.hbm_bandwidth / hw.sm_count)
    merged = batch * heads * sum(c.hbm_bytes for _, c in merge)
    seconds += merged / hw.hbm_bandwidth
    total = batch * heads * split.hbm_bytes + merged
    return Occupancy(splits, blocks, hw.sm_count, min(blocks, hw.sm_count), waves, total, seconds)


def best_splits(batch: int, heads: int, Nq: int, Nk: int, d: int, s: int, hw: Hardware, most: int = 128) -> int:
    """The number of splits (1 … min(most, Nk)) the model finds fastest; the fewest among equals."""
    options = range(1, min(most, Nk) + 1)
    return min(options, key=lambda P: (occupancy(batch, heads, P, Nq, Nk, d, s, hw).seconds, P))
