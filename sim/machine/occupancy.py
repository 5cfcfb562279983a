"""How many SMs Flash-Decoding's thread blocks keep busy, and the time that gives both of its kernels."""

from dataclasses import dataclass
from math import ceil

from sim.machine.blocks import decoding_footprint
from sim.machine.hardware import Hardware
from sim.machine.iomodel import decoding

# Thread blocks an SM needs beside each other to draw its share of the HBM bandwidth: one where a block streams its
# rows a tile of TILE_KEYS keys at a time as one strided run (a contiguous cache, or a paged one whose pages hold
# whole tiles), two where each row finds its own page (pages shorter than a tile, or not a multiple of one). And for
# such a cache best_splits takes the fewest splits within PAGED_SLACK of the fastest: past two blocks per SM each
# more block costs its fill and drain, which the model does not count. Measured on an H100 (Hq 64, Hkv 8, d 128,
# fp16, CUDA graph steps; gpu/NOTES.md run 45): pages of 16, one block per SM against two, 1.43× at B 4 Nk 16K, 1.34×
# at B 1 Nk 32K, 1.46× at B 16 Nk 4K; pages of 256 — one strided run a tile since run 43-dec8 — 0.99×, 0.96×, 0.95×
# and 0.98× at B 16 Nk 32K: at one block per SM they stream as the contiguous cache does (run 35-dec2, before that
# change, had 1.56× and 1.58× for pages of 256). A paged split is a run of whole pages, so best_splits takes at most
# the longest sequence's pages: at B 1, Nk 4K in pages of 256 the rule's 32 splits left 16 blocks of each group
# empty, and 16 took 16.1–16.4 µs a step against 17.3–17.5 (gpu/NOTES.md run 42-dec7).
TILE_KEYS = 64  # keys of rung 8's K_j, V_j tiles (gpu.geometry.decoding_tiles)
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


def blocks_per_sm(page_size: int) -> int:
    """Blocks an SM needs to draw its share of the bandwidth: 1 (contiguous, page_size 0, or pages of whole tiles),
    else PAGED_PER_SM."""
    return 1 if page_size % TILE_KEYS == 0 else PAGED_PER_SM


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
    per_sm: int = 1  # blocks per SM that share its bandwidth (`blocks_per_sm`)

    @property
    def utilization(self) -> float:
        """Fraction of SM-time that does work: blocks / (waves × per_sm × SMs)."""
        return self.blocks / (self.waves * self.per_sm * self.sm_count)


def occupancy(
    batch: int, heads: int, splits: int, Nq: int, Nk: int, d: int, s: int, hw: Hardware, Bc: int | None = None,
    per_sm: int = 1,
) -> Occupancy:  # fmt: skip
    """The model: blocks run in waves of `per_sm` per SM (`blocks_per_sm` of the cache's page size), each streaming its
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
    (page_size > 0) at most the ⌈Nk / page_size⌉ pages of the longest sequence: a split is a run of whole pages, so
    past that the splits that hold keys are no more (sim.api.paged, the kernel: min(splits, its pages)) and the rest
    are empty blocks; where its rows find their pages one by one (`per_sm` 2), the fewest within PAGED_SLACK of the
    fastest. Only counts whose buffers fit the SRAM one key at a time are candidates (the combine's lse_p grow
    with P), so many query rows take fewer splits rather than none; where none fits, 1 (the least SRAM), and
    sim.decode's refusal names the rows."""
    paged = page_size > 0
    per_sm = blocks_per_sm(page_size)
    slack = PAGED_SLACK if per_sm > 1 else 0.0
    most = min(most, Nk, ceil(Nk / page_size) if paged else Nk)
    if not (fit := most_splits(Nq, d, s, hw, most)):
        return 1
    seconds = {P: occupancy(batch, heads, P, Nq, Nk, d, s, hw, per_sm=per_sm).seconds for P in range(1, fit + 1)}
    fastest = min(seconds.values())
    return min(P for P, t in seconds.items() if t <= fastest * (1 + slack))


def most_splits(Nq: int, d: int, s: int, hw: Hardware, most: int) -> int:
    """The most splits (≤ most) whose buffers fit the SRAM one key at a time, 0 if not even one split's."""
    fits = [P for P in range(1, most + 1) if sum(decoding_footprint(Nq, 1, d, s, P).values()) <= hw.sram_bytes]
    return max(fits, default=0)
