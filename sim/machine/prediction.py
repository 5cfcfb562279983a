"""Below HBM for a whole pass: DRAM bytes (the L2 model), L2 → SM bytes and time (the time model), per kernel.

The one entry point the API, the CLI, `flashsim compare` and the lessons use. Beyond `EXACT_HEADS` heads the L2
is played for EXACT_HEADS / 2 and EXACT_HEADS heads and the bytes extended linearly: every head runs the same
blocks, and only a few heads are ever resident at once, so each further head adds the same misses (the time
model always sees every block). A persistent launch (rung 6) is played for as many heads as `MOST_STEPS` allows
before it is extended: its blocks at work hold units a grid apart, the walk falls across the planes differently
for every count of heads, and 8 and 16 heads' ends are no sample of 128's middle (d = 128, N = 16384, causal,
128 heads: 2071 MiB extended from 8 and 16, 1960 MiB played whole, 1993 measured; gpu/NOTES.md run 36-model5).
"""

from dataclasses import dataclass
from math import ceil

from sim.core.errors import InputError
from sim.machine import grids, iomodel
from sim.machine.hardware import Hardware
from sim.machine.l2 import Traffic, l2_to_sm, paced, paces, play
from sim.machine.launch import Launch, slots
from sim.machine.timing import ATOMICS, REDUCES, Time, kernel_time

EXACT_HEADS = 16
MOST_STEPS = 2_000_000  # block-steps the L2 is played for at most (a few seconds of Python)
MOST_BLOCKS = 2**16  # thread blocks the time model walks one by one at most (~30 µs each on a laptop core)
PADDED_TENSORS = ("Q", "KV", "QdO")  # the tiles the FlashAttention kernels copy into SRAM rows


@dataclass(frozen=True)
class KernelPrediction:
    name: str
    traffic: Traffic
    l2_to_sm: float  # bytes L2 hands the SMs for reads (padding included)
    time: Time


@dataclass(frozen=True)
class Prediction:
    """A pass's kernels, each with its DRAM traffic and time; the pass takes the sum of their times."""

    kernels: list[KernelPrediction]
    launch: Launch
    hardware: str

    @property
    def dram_read_bytes(self) -> int:
        return sum(k.traffic.dram_read for k in self.kernels)

    @property
    def dram_write_bytes(self) -> int:
        """Written to DRAM while the kernels ran (dirty tiles evicted); `left_dirty_bytes` follow after."""
        return sum(k.traffic.dram_write for k in self.kernels)

    @property
    def left_dirty_bytes(self) -> int:
        return sum(k.traffic.left_dirty for k in self.kernels)

    @property
    def l2_to_sm_bytes(self) -> float:
        return sum(k.l2_to_sm for k in self.kernels)

    @property
    def seconds(self) -> float:
        return sum(k.time.seconds for k in self.kernels)

    @property
    def bound(self) -> str:
        """What bounds the slowest kernel."""
        return max(self.kernels, key=lambda k: k.time.seconds).time.bound

    @property
    def in_series(self) -> bool:
        """Whether the slowest kernel's time is its warpgroups' step (Launch.program; its bound then the busiest unit)."""
        return max(self.kernels, key=lambda k: k.time.seconds).time.in_series

    def summary(self) -> dict:
        """JSON-ready: DRAM bytes, time, bound, each resource's time (seconds) and the launch assumed."""
        return {
            "hardware": self.hardware,
            "launch": self.launch.describe(),
            "dram_read_bytes": self.dram_read_bytes,
            "dram_write_bytes": self.dram_write_bytes,
            "left_dirty_bytes": self.left_dirty_bytes,
            "l2_to_sm_bytes": self.l2_to_sm_bytes,
            "seconds": self.seconds,
            "compute_seconds": sum(k.time.compute for k in self.kernels),
            "bound": self.bound,
            "in_series": self.in_series,
            "terms": self.terms(),
            "waves": max(k.time.waves for k in self.kernels),
        }

    def terms(self) -> dict[str, float]:
        """Each resource's time summed over the kernels, and the launch overheads (dQ's additions only where there
        are some and a rate to charge them at)."""
        out: dict[str, float] = {}
        for k in self.kernels:
            for name, t in k.time.terms.items():
                out[name] = out.get(name, 0.0) + t
        for adds in (ATOMICS, REDUCES):
            if not out.get(adds):
                out.pop(adds, None)
        return out | {"launch": sum(k.time.launch for k in self.kernels)}


BACKWARD_MODELLED = ("flash2",)  # the algorithms whose backward the L2 and time model covers


def kernels_of(
    algorithm: str, N, Nk, d, s, Br, Bc, causal, heads, backward=False, launch=None, sms=0
) -> list[grids.Kernel]:  # fmt: skip
    """The grids of `algorithm`'s forward (or backward, as `launch` adds dQ_i) kernels; a persistent `launch` runs
    its forward as one block per SM of `sms`."""
    shape = (N, Nk, d, s, Br, Bc, causal, heads)
    if backward:
        if algorithm not in BACKWARD_MODELLED:
            raise InputError(f"prediction: the L2 and time model covers flash2's backward only, not {algorithm!r}'s")
        return grids.flash2_backward(*shape, dq_adders=launch.dq_adders if launch else 1)
    if algorithm == "flash2":
        persistent = launch is not None and launch.persistent
        whole = launch is not None and launch.whole_tiles
        return [grids.flash2_forward(*shape, sms=sms if persistent else 0, o_buffer=persistent and launch.o_buffer,
                                     whole_tiles=whole)]  # fmt: skip
    if algorithm == "standard":
        return grids.standard_forward(*shape)
    if algorithm == "flash1":
        c = iomodel.flash1(N, Nk, d, s, Bc, causal, Br=Br)
        return [grids.flash1_forward(*shape, work=(c.flops, c.exps, c.elementwise))]
    raise InputError(f"prediction: no grid for algorithm {algorithm!r}; the model covers flash2, flash1 and standard")


def affordable(N: int, Nk: int, Br: int, Bc: int, heads: int) -> bool:
    """Whether playing the L2 for this shape stays under MOST_STEPS block-steps (one per tile pair)."""
    return ceil(N / Br) * ceil(Nk / Bc) * min(heads, EXACT_HEADS) <= MOST_STEPS


def traffic(make, heads: int, n_slots: int, capacity: int, exact: int = EXACT_HEADS, pace=None) -> Traffic:
    """The kernel `make(h)` builds for h heads played against L2 (extended linearly past `exact` heads): in lockstep,
    each further head adding what `exact` heads' play counts over `exact` / 2 heads' (a unit of exact / 2 heads); with
    `pace` (`l2.paced`), what one play of `exact` heads counts between the starts of heads exact / 2 and exact − 1
    (its waves drift apart over its first ones, which are no sample of the rest)."""
    if heads <= exact:
        return paced(make(heads), pace, capacity) if pace else play(make(heads), n_slots, capacity)
    if pace:
        per_head = len(make(1).blocks)
        full = paced(make(exact), pace, capacity, (exact // 2 * per_head, (exact - 1) * per_head))
        a, b = full.marks
        k = (heads - exact) / (exact - 1 - exact // 2)  # further heads, in units of the marked stretch
    else:
        a, full = (play(make(h), n_slots, capacity) for h in (exact // 2, exact))
        b, k = full, (heads - exact) / (exact // 2)  # further heads, in units of the half

    def extend(field: str) -> int:  # DRAM's bytes; what the blocks ask is every head's same bytes
        return round(getattr(full, field) + k * (getattr(b, field) - getattr(a, field)))

    scale = heads / exact
    return Traffic({name: round(n * scale) for name, n in full.asked_read.items()}, round(full.asked_write * scale),
                   round(full.reduced * scale), extend("dram_read"), extend("dram_write"), full.left_dirty)  # fmt: skip


def crossing_reads(kernel: grids.Kernel, halves: int) -> float:
    """Bytes L2's `halves` hand each other for `kernel`'s reads: every line lives in one half (its home, where it is
    filled from DRAM); an SM reads through its own half, which asks the home half once for a line it does not hold
    and keeps a copy. A tile read by k thread blocks, each on an SM of either half with even odds, crosses unless all
    k sit beside its home: 1 − 2^−k of its bytes (½ read by one block, all of it, nearly, by many). Read-for-adds
    cross as adds (`reduced`), not here; a tile evicted and read again is counted once (not modelled)."""
    readers: dict[tuple, set[int]] = {}
    size: dict[tuple, int] = {}
    for b, block in enumerate(kernel.blocks):
        for step in block.steps():
            for name, nbytes, kind in step:
                if kind == "r":
                    readers.setdefault(name, set()).add(b)
                    size[name] = nbytes
    return sum(size[name] * (1 - (1 / halves) ** len(r)) for name, r in readers.items())


def predict(
    algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool, heads: int, hw: Hardware,
    launch: Launch, backward: bool = False,
) -> Prediction:  # fmt: skip
    """DRAM bytes and time of `algorithm`'s forward (or backward) for `heads` heads run as `launch` on `hw`; a grid
    of more than MOST_BLOCKS thread blocks (heads × row blocks) is refused in one line before any work."""
    if heads * ceil(N / Br) > MOST_BLOCKS:
        raise InputError(
            f"predict: {heads * ceil(N / Br):,} thread blocks ({heads:,} heads × {ceil(N / Br):,} row blocks) is more "
            f"than the time model walks ({MOST_BLOCKS:,}); predict fewer heads: the same blocks repeat in waves"
        )
    n_slots = slots(launch, hw)
    exact = EXACT_HEADS
    walks = launch.persistent and not backward
    pace = paces(n_slots, hw.sm_count, hw.sm_pace_spread) if hw.sm_pace_spread and not walks else None
    if walks or pace:  # as many heads as MOST_STEPS allows: one step per tile pair a head sees
        exact = max(EXACT_HEADS, MOST_STEPS // max(1, iomodel.sums(N, Nk, Br, Bc, causal).seen))
    out = []
    shape = (algorithm, N, Nk, d, s, Br, Bc, causal)
    for n, kernel in enumerate(kernels_of(*shape, heads, backward, launch, hw.sm_count)):

        def make(h, n=n):
            return kernels_of(*shape, h, backward, launch, hw.sm_count)[n]

        t = traffic(make, heads, n_slots, hw.l2_shared_bytes, exact, pace)
        padded = PADDED_TENSORS if launch.padded_rows else ()
        to_sm = l2_to_sm(t, padded)
        dram = t.dram_read + t.dram_write  # L2's work: what the SMs read, write and add, and each line it fills from
        # DRAM or writes back (ncu's lts__t_bytes counts the fills: run 40-model9)
        # by kind, for L2's parts (`timing.l2_parts`): the backward's main kernel (grids.flash2_backward's second)
        # under a warpgroups' program (rung 7) stores dK_j, dV_j from registers in 16-byte pieces; every other kernel
        # in whole lines; dQ_i added by TMA reduce-adds, or by atomics (a kind no loop measured); a persistent
        # forward (rung 6) prefetches each tile's Q_i into L2 a tile ahead of its load (gpu/NOTES.md run 44-model16)
        pieces = backward and launch.program is not None and n == 1
        h = min(heads, exact)  # each head's tiles its own: the crossings of h heads, scaled (where L2 has parts)
        crossed = crossing_reads(make(h), hw.l2_partitions) * heads / h if hw.l2_parts else 0.0
        work = {"read": to_sm, "fill": t.dram_read, "cross_read": crossed,
                "write_back": t.dram_write,
                "store_pieces" if pieces else "store_wide": t.asked_write,
                "reduced" if launch.dq_bulk else "atomics": t.reduced,
                "prefetch": t.asked_read.get("Q", 0) if walks else 0}  # fmt: skip
        time = kernel_time(kernel.blocks, launch, hw, dram, to_sm + t.asked_write + t.reduced + dram, work)
        out.append(KernelPrediction(kernel.name, t, to_sm, time))
    return Prediction(out, launch, hw.name)
