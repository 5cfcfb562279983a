"""The L2 cache: which of a kernel's global-memory requests reach DRAM, and what L2 hands the SMs.

"HBM accesses" as the paper's Theorem 2 counts them are every byte a thread block asks of global memory.
On a GPU those requests go to the L2 cache first; only misses reach DRAM (the HBM chips). This model plays a
kernel's thread blocks (`sim.machine.grids`) against one L2 and counts the misses.

Assumptions, each a simplification a student can check against `flashsim compare`:
- **Launch order**: blocks start in blockIdx order (x fastest: the Q blocks of one head, then the next head's),
  `slots` at a time (SMs × blocks per SM, `sim.machine.launch`); when one ends, the next takes its slot.
  A persistent kernel (rung 6) has one block per SM, each the list of tiles it walks
  (`sim.machine.grids.persistent_walk`): nothing waits for a slot, and the blocks at work hold tiles of the walk
  a grid apart, not neighbours in launch order.
- **Lockstep** (`play`): every running block makes one step (one trip of its inner loop) per tick. Blocks of one
  head that start together ask for K_j at the same tick, so one miss serves them all. Blocks drift apart only by
  the steps their work differs in. A persistent kernel (rung 6) is played so: with tickets its units at work stay
  ~grid consecutive whatever the blocks' paces (run 42-sched15); the static walk's drift (run 41-dram12) is not
  modelled.
- **Paces** (`paced`, a grid whose blocks take the slot that frees first, where `Hardware.sm_pace_spread` is
  measured): each SM steps at its own pace, spread evenly over a band of that standard deviation (H100: 0.60%, the
  SMs' mean block times of rung 7, gpu.lab.rung7_blocks paces). Measured (gpu.lab.block_stamps, run 43-bwd8, rung 7,
  d = 128, N = 16384, full, 8 × 16): its waves start within 0.3 µs at first, 16 µs apart at the second, 186 at the
  tenth, a whole block (600 µs) from the ~40th on: linearly, as SMs of different paces do. In lockstep the 4 blocks
  of a head that share the first wave with the head before read its Q_i, dO_i and dQ_i one block's time before the
  other 124 do, 32 MiB of tiles apart: every byte twice (7184 MiB); once the blocks of a head run spread over its Q
  blocks, ~16 MiB apart: once. Played paced, 5851 MiB (ncu 5887); the measured schedule replayed, 3531 MiB for the
  main kernel's 3445.
- **LRU, whole tiles**: L2 is one fully associative cache of `capacity` bytes holding whole tiles; the least
  recently used tile leaves first. No prefetch, no sectors, no set conflicts.
- **One partition's capacity**: A100's and H100's L2 are two partitions, and a line that SMs on both sides read
  is kept in both; every tile here is read by SMs everywhere, so `capacity` is one partition's
  (`Hardware.l2_shared_bytes`). This assumption came from a measurement: with the whole 50 MiB the model
  under-predicted rung 5's DRAM reads at d = 128, N = 16384 by 27%; with 25 MiB it is within 1% (gpu/NOTES.md).
  Measured since (gpu.lab.l2_capacity, run 41-dram12): a buffer every SM reads stops fitting at 24–26 MiB; one each
  SM reads its own part of, at ~40 MiB; one added into, at ~50 MiB (`HeldL2`; not used here).
- **Write-back, write-allocate**: a written tile is kept dirty and reaches DRAM only when it is evicted; writes
  of whole tiles read nothing. An atomic add ("rw") reads the tile on a miss and leaves it dirty.
- **Cold start**: each kernel starts with an empty L2 and dirty tiles left at its end are written after it (as
  Nsight Compute measures a kernel: it flushes L2 before each one). Those are reported apart.
"""

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field

from sim.machine.grids import Kernel

PADDED = 1.5  # L2 → SM bytes per byte asked, for a tile copied into shared-memory rows padded by 16 bytes


@dataclass
class Traffic:
    """One kernel's bytes below the SMs: asked of L2 (Theorem 2's count), read from and written to DRAM."""

    asked_read: dict[str, int] = field(default_factory=dict)  # per tensor name, read or read-for-add
    asked_write: int = 0
    reduced: int = 0  # bytes added into by atomics ("rw"), at L2
    dram_read: int = 0
    dram_write: int = 0  # dirty tiles evicted while the kernel ran
    left_dirty: int = 0  # dirty tiles still in L2 at the end: written to DRAM after the kernel
    marks: list["Traffic"] = field(default_factory=list)  # `paced`: the counts as given blocks start

    @property
    def read(self) -> int:
        return sum(self.asked_read.values())


class L2:
    """A fully associative LRU cache of whole tiles, write-back."""

    def __init__(self, capacity: int, traffic: Traffic):
        self.capacity, self.size, self.t = capacity, 0, traffic
        self.tiles: OrderedDict[tuple, list] = OrderedDict()  # name → [bytes, dirty], least recent first

    def touch(self, name: tuple, nbytes: int, kind: str) -> None:
        """One request: a hit refreshes the tile; a miss reads it from DRAM (unless it is only written)."""
        tile = self.tiles.get(name)
        if tile is not None:
            self.tiles.move_to_end(name)
            tile[1] = tile[1] or kind != "r"
            return
        if kind != "w":
            self.t.dram_read += nbytes
        self.tiles[name] = [nbytes, kind != "r"]
        self.size += nbytes
        while self.size > self.capacity:
            _, (size, dirty) = self.tiles.popitem(last=False)
            self.size -= size
            self.t.dram_write += size * dirty

    def dirty(self) -> int:
        return sum(tile[0] for tile in self.tiles.values() if tile[1])


class HeldL2(L2):
    """An LRU cache of whole tiles in which a tile fills the share `held[way]` of its bytes, by how it is touched:
    "shared" (read by two or more thread blocks), "private" (read by one), "add" (added into: "rw"), "write".

    Why (gpu/lab/l2_capacity.py, H100, gpu/NOTES.md run 41-dram12): a buffer read over and over by every SM stops
    fitting past 24–26 MiB (one of L2's two halves: each half keeps a copy), one read by a single SM past ~40 MiB,
    one added into (red.global.add) past ~50 MiB (the whole L2: a line is added into at its own half only). With
    `capacity` one half's bytes the shares are 1, 25/40 and 25/50; writes were not measured. Not what `play`
    uses: gpu.lab.block_stamps replays measured schedules through it (lockstep with these shares moves neither
    of issue 22's two misses, run 41-dram12)."""

    def __init__(self, capacity: int, traffic: Traffic, held: dict[str, float]):
        super().__init__(capacity, traffic)
        self.held = held  # tiles: name → [bytes, dirty, bytes filled, its one reader or None]

    def touch(self, name: tuple, nbytes: int, kind: str, reader: int = 0) -> None:
        tile = self.tiles.get(name)
        if tile is not None:
            self.tiles.move_to_end(name)
            tile[1] = tile[1] or kind != "r"
            tile[3] = reader if tile[3] == reader else None
        else:
            if kind != "w":
                self.t.dram_read += nbytes
            tile = self.tiles[name] = [nbytes, kind != "r", 0, reader]
        way = {"rw": "add", "w": "write"}.get(kind) or ("private" if tile[3] is not None else "shared")
        filled = nbytes * self.held[way]
        self.size += filled - tile[2]
        tile[2] = filled
        while self.size > self.capacity:
            _, (size, dirty, filled, _) = self.tiles.popitem(last=False)
            self.size -= filled
            self.t.dram_write += size * dirty


def paces(slots: int, sms: int, spread: float) -> list[float]:
    """Ticks a step takes on each of `slots` slots: its SM's pace, the SMs' paces evenly spread (golden-ratio
    sequence over the SM index) over a uniform band of standard deviation `spread` around 1."""
    band = spread * 3**0.5
    return [1 + band * (2 * ((k % sms) * 0.6180339887498949 % 1) - 1) for k in range(slots)]


def _book(t: Traffic, step) -> None:
    for name, nbytes, kind in step:
        if kind == "w":
            t.asked_write += nbytes
        else:
            t.asked_read[name[0]] = t.asked_read.get(name[0], 0) + nbytes
            t.reduced += nbytes if kind == "rw" else 0


def paced(kernel: Kernel, pace: list[float], capacity: int, marks: tuple[int, ...] = ()) -> Traffic:
    """Run `kernel`'s blocks on len(`pace`) slots, each step of a block on slot k taking pace[k] ticks, the next block in
    launch order taking the slot that frees first, every request in time order against a cold L2 of `capacity` bytes
    (a request for a tile another block has just brought in hits); the counts so far as each block of `marks` starts
    (launch indices, `Traffic.marks`)."""
    t = Traffic()
    cache, pending, queue = L2(capacity, t), enumerate(kernel.blocks), []
    for k, (_, block) in zip(range(len(pace)), pending, strict=False):
        heapq.heappush(queue, (0.0, k, block.steps()))
    while queue:
        now, k, steps = heapq.heappop(queue)
        step = next(steps, None)
        while step is None:  # this block is done: the next in launch order takes its slot
            b, block = next(pending, (None, None))
            if block is None:
                break
            if b in marks:
                t.marks.append(Traffic(dict(t.asked_read), t.asked_write, t.reduced, t.dram_read, t.dram_write))
            steps = block.steps()
            step = next(steps, None)
        if step is None:
            continue
        _book(t, step)
        for name, nbytes, kind in step:
            cache.touch(name, nbytes, kind)
        heapq.heappush(queue, (now + pace[k], k, steps))
    t.left_dirty = cache.dirty()
    return t


def play(kernel: Kernel, slots: int, capacity: int) -> Traffic:
    """Run `kernel`'s blocks `slots` at a time in lockstep against a cold L2 of `capacity` bytes."""
    t = Traffic()
    cache = L2(capacity, t)
    pending = iter(kernel.blocks)
    running = [b.steps() for _, b in zip(range(slots), pending, strict=False)]
    while running:
        still, tick = [], {}  # this tick's requests, each tile once: the blocks in lockstep share them
        for steps in running:
            step = next(steps, None)
            while step is None:  # this block is done: the next in launch order takes its slot
                block = next(pending, None)
                if block is None:
                    break
                steps = block.steps()
                step = next(steps, None)
            if step is None:
                continue
            still.append(steps)
            _book(t, step)
            for name, nbytes, kind in step:
                if name not in tick or kind != "r":
                    tick[name] = (nbytes, kind)
        for name, (nbytes, kind) in tick.items():
            cache.touch(name, nbytes, kind)
        running = still
    t.left_dirty = cache.dirty()
    return t


def l2_to_sm(t: Traffic, padded: tuple[str, ...] = ()) -> float:
    """Bytes L2 hands the SMs for the reads: what was asked, the tensors in `padded` × 1.5, atomics excluded.

    Why 1.5 (our reading; measured ×1.500 on rung 2 and ×1.486 on rung 5 = 1.5 on Q, K, V, dO and 1.0 on L, D):
    L1 fills shared memory 32-byte sector by sector of the destination. A row padded by 16 bytes starts every
    other row 16 bytes into a sector, so each of its sectors spans two sectors of the source: even rows cost
    n sectors, odd rows 2n, on average 1.5n. Swizzled rows and TMA copies (rung 6) start on sectors: ×1.0.
    """
    return sum(b * (PADDED if name in padded else 1.0) for name, b in t.asked_read.items()) - t.reduced
