"""How many SMs Flash-Decoding's thread blocks keep busy, and the time that gives both of its kernels."""

from dataclasses import dataclass
from math import ceil

from sim.machine.hardware import Hardware
from sim.machine.iomodel import decoding

# Thread blocks an SM needs beside each other to draw its share of the HBM bandwidth: one where a block streams
# contiguous rows, two where it reads a paged cache (num_pages, page_size, Hkv, d): one head's d·s bytes of every
# Hkv·d·s. And for a paged cache best_splits takes the fewest splits within PAGED_SLACK of the fastest: past two
# blocks per SM each more block costs its fill and drain, which the model does not count. Measured on an H100
# (gpu/NOTES.md run 35-dec2; B 4, Nk 16K and B 16, Nk 4K, Hkv 8, pages of 256): paged at one block per SM took
# 1.56× and 1.58× contiguous's time, at two per SM (8 and 2 splits) 1.03× and 1.08×, at 33 splits 1.34× and 1.49×.
# A paged split is a run of whole pages, so best_splits takes at most the longest sequence's pages: at B 1, Nk 4K in
# pages of 256 the rule's 32 splits left 16 blocks of each group empty, and 16 took 16.1–16.4 µs a step against
# 17.3–17.5 (gpu/NOTES.md run 42-dec7; CUDA graph steps on an H100).
PAGED_PER_SM = 2
PAGED_SLACK = 0.02
# What a wave of thread blocks costs beside its bytes: each block's pipeline fills (its first tiles' DRAM round
# trips) and drains (the warps' merge, O_p's write, the ticket) once. Fitted on an H100 (gpu/NOTES.md run 37-dec3;
# Hq 64, Hkv 8, d 128, the launch alone): 33 splits took 3.7 µs more than 16 at B 1, Nk 128K, 31 µs more than 4
# at B 4, Nk 128K and 90 µs more than 1 at B 16, Nk 128K, which the model's other terms put at 8.3, 6.9 and 5.1 µs
# a wave (1.7 at B 16, Nk 32K). Any value from 4.7 to 8 µs makes the measured fastest count (or one within 1% of
# it) the model's at every point timed; without it the model took 33 splits (32 waves) at B 16, where one split was
# 3–7% faster.
WAVE_SECONDS = 6e-6


@dataclass(frozen=True)
class Occupancy:
    """Thread blocks of kernel 1 against the SMs, and the time the model gives both kernels."""

    splits: int
    blocks: int  # batch × heads × splits thread blocks
    sm_count: int
    busy: int  # SMs with a block in the first wave
    waves: int  # ⌈blocks / (per_sm × SMs)⌉
    hbm_bytes: int  # both kernels, every head
    seconds: float
    per_sm: int = 1  # blocks per SM that share its bandwidth (PAGED_PER_SM for a paged cache)

    @property
    def utilization(self) -> float:
        """Fraction of SM-time that does work: blocks / (waves × per_sm × SMs)."""
        return self.blocks / (self.waves * self.per_sm * self.sm_count)


def occupancy(
    batch: int, heads: int, splits: int, Nq: int, Nk: int, d: int, s: int, hw: Hardware, Bc: int | None = None,
    per_sm: int = 1,
) -> Occupancy:  # fmt: skip
    """The model: blocks run in waves of `per_sm` per SM (1; PAGED_PER_SM for a paged cache), each streaming its
    chunk at a 1/per_sm part of its SM's share of the HBM bandwidth (bandwidth / SM count: all SMs busy together
    saturate HBM), and each wave also costs WAVE_SECONDS (its blocks' fill and drain); the combine kernel is
    memory-bound at full bandwidth.
    """
    (_, split), *merge = decoding(Nq, Nk, d, s, Bc or Nk, splits)
    blocks = batch * heads * splits
    slots = per_sm * hw.sm_count
    waves = ceil(blocks / slots)
    per_block = split.hbm_bytes / splits  # what one thread block moves (chunks differ by at most one key)
    seconds = waves * (per_block / (hw.hbm_bandwidth / slots) + WAVE_SECONDS)
    merged = batch * heads * sum(c.hbm_bytes for _, c in merge)
    seconds += merged / hw.hbm_bandwidth
    total = batch * heads * split.hbm_bytes + merged
    return Occupancy(splits, blocks, hw.sm_count, min(blocks, hw.sm_count), waves, total, seconds, per_sm)


def best_splits(
    batch: int, heads: int, Nq: int, Nk: int, d: int, s: int, hw: Hardware, most: int = 128, page_size: int = 0
) -> int:
    """The number of splits (1 … min(most, Nk)) the model finds fastest, the fewest among equals; for a paged cache
    (page_size > 0: PAGED_PER_SM blocks per SM), the fewest within PAGED_SLACK of the fastest, and at most the
    ⌈Nk / page_size⌉ pages of the longest sequence: a split is a run of whole pages, so past that the splits that
    hold keys are no more (sim.api.paged, the kernel: min(splits, its pages)) and the rest are empty blocks."""
    paged = page_size > 0
    per_sm, slack = (PAGED_PER_SM, PAGED_SLACK) if paged else (1, 0.0)
    most = min(most, Nk, ceil(Nk / page_size) if paged else Nk)
    seconds = {P: occupancy(batch, heads, P, Nq, Nk, d, s, hw, per_sm=per_sm).seconds for P in range(1, most + 1)}
    fastest = min(seconds.values())
    return min(P for P, t in seconds.items() if t <= fastest * (1 + slack))
