"""Closed forms beyond one GPU: each device's HBM bytes and work, each link's bytes, and the time per ring step.

Ring attention (`sim.algorithms.ring`), per device, with f = 4 (float32) and s the storage itemsize:
  forward   O_run, L_run zeroed: f·n·(d + 1) written; per piece (r query rows, c keys) FlashAttention-2's
            closed form (`sim.machine.iomodel.flash2`) plus the merge: (2f·r·d… see `merge`); then O_run cast: f·n·d
            read, s·n·d written. Link: the K/V shard in hand, 2·c·d·s, after each step but the last.
  backward  dQ_run, dK_in, dV_in zeroed; per piece FlashAttention-2's backward (`sim.machine.iomodel`) plus the three
            float32 accumulations; then the casts. Link: K/V after each step but the last, and the float32
            dK, dV after every step (the last hop brings them home): P hops of 2·c·d·f.
Ulysses (`sim.algorithms.ulysses`): all-to-all of q, k, v (sequence → heads), FlashAttention-2 on H/P whole heads,
all-to-all of O back; backward: dO there, dQ, dK, dV back. A device keeps 1/P of what it holds and sends the rest.
Time per step = max(compute, transfer) when the exchange overlaps the step's attention, compute + transfer when not.
"""

from dataclasses import dataclass
from functools import cache, lru_cache

from sim.core.dtypes import F
from sim.machine import iomodel
from sim.machine.devices import Link
from sim.machine.hardware import Hardware
from sim.machine.iomodel import Counts, sum_counts
from sim.machine.sharding import pieces, shards

NOTHING = Counts(0, 0, 0, 0, 0)


def merge(r: int, d: int, s: int) -> Counts:
    """(O_run, L_run) ⊕ (O_t, L_t) on r rows: read O_run, L_run (f), O_t (s), L_t (f); write O_run, L_run."""
    return Counts(r * (F * d + F + s * d + F), F * r * (d + 1), 0, 2 * r, 6 * r + 4 * r * d)


def add(r: int, d: int, s: int) -> Counts:
    """A float32 accumulator of r rows takes one step's gradient (storage dtype): read both, write the sum."""
    return Counts(r * d * (F + s), F * r * d, 0, 0, r * d)


def cast(r: int, d: int, s: int) -> Counts:
    """A float32 result of r rows written in the storage dtype."""
    return Counts(F * r * d, s * r * d, 0, 0, 0)


def sizes(N: int, P: int, sharding: str) -> list[int]:
    """Rows each device holds."""
    return [sum(r1 - r0 for r0, r1 in chunks) for chunks in shards(N, P, sharding)]


@lru_cache(maxsize=8)  # ring_device and ring_time walk the same P² pieces
def ring_steps(N, d, s, P, sharding, causal, Br, Bc, *, backward=False) -> tuple[tuple[Counts, ...], ...]:
    """Counts[t][p]: device p's work at ring step t (its pieces, each with its merge or accumulations)."""
    held = shards(N, P, sharding)
    steps = []
    for t in range(P):
        row = []
        for p in range(P):
            total = NOTHING
            for piece in pieces(held[p], held[(p - t) % P], causal):
                total += _piece(piece.rows, piece.keys, d, s, Br, Bc, piece.causal, backward)
            row.append(total)
        steps.append(tuple(row))
    return tuple(steps)


@cache  # a ring's P² pieces come in a few shapes
def _piece(r: int, c: int, d: int, s: int, Br: int, Bc: int, causal: bool, backward: bool) -> Counts:
    """One piece (r query rows against c keys): FlashAttention-2 and the merge, or its backward and the three
    accumulations."""
    if backward:
        kernel = iomodel.sum_counts(k for _, k in iomodel.flash2_backward_kernels(r, c, d, s, Br, Bc, causal))
        return kernel + add(r, d, s) + add(c, d, s).times(2)
    return iomodel.flash2(r, c, d, s, Br, Bc, causal) + merge(r, d, s)


def ring_ends(N, d, s, P, sharding, *, backward=False) -> tuple[list[Counts], list[Counts]]:
    """(before the ring, after it) per device: the float32 accumulators zeroed, then cast to the storage dtype."""
    n = sizes(N, P, sharding)
    if backward:
        return [Counts(0, 3 * F * x * d, 0, 0, 0) for x in n], [cast(x, d, s).times(3) for x in n]
    return [Counts(0, F * x * (d + 1), 0, 0, 0) for x in n], [cast(x, d, s) for x in n]


def ring_device(N, d, s, P, sharding, causal, Br, Bc, *, backward=False) -> list[Counts]:
    """Each device's whole pass (one head)."""
    first, last = ring_ends(N, d, s, P, sharding, backward=backward)
    steps = ring_steps(N, d, s, P, sharding, causal, Br, Bc, backward=backward)
    return [first[p] + sum_counts(row[p] for row in steps) + last[p] for p in range(P)]


def ring_link_steps(N, d, s, P, sharding, *, backward=False) -> list[list[int]]:
    """Bytes[t][p] device p sends while step t runs (one head): the K/V for step t + 1 and, backward, the dK, dV
    of step t − 1; backward adds a last row, the dK, dV of step P − 1 going home."""
    n = sizes(N, P, sharding)
    kv = [[2 * n[(p - t) % P] * d * s if t < P - 1 else 0 for p in range(P)] for t in range(P)]
    if not backward or P == 1:
        return kv
    grads = [[2 * n[(p - t + 1) % P] * d * F if t >= 1 else 0 for p in range(P)] for t in range(P + 1)]
    return [[(kv[t][p] if t < P else 0) + grads[t][p] for p in range(P)] for t in range(P + 1)]


def ring_link(N, d, s, P, sharding, *, backward=False) -> list[int]:
    """Bytes each device sends in the whole pass (one head)."""
    return [sum(col) for col in zip(*ring_link_steps(N, d, s, P, sharding, backward=backward), strict=True)]


def ring_footprint(n: int, d: int, s: int) -> int:
    """HBM one device of the ring holds in the forward (one head, a shard of n rows): Q_p, K_p, V_p; the K/V shard
    in hand and the one arriving; O_run, L_run (float32); a partial O_t, L_t; and O."""
    return 3 * s * n * d + 4 * s * n * d + F * n * (d + 1) + (s * n * d + F * n) + s * n * d


def ulysses_footprint(N: int, n: int, d: int, s: int, H: int, P: int) -> int:
    """HBM one device holds in Ulysses' forward (H heads, n rows of its own): q, k, v and O in the sequence layout
    (H heads × n rows), and q, k, v, O and L in the head layout (H/P heads × N rows)."""
    return 4 * s * H * n * d + (H // P) * N * (4 * s * d + F)


def ulysses_device(N, d, s, P, H, causal, Br, Bc, *, backward=False) -> list[Counts]:
    """Each device's work for H heads: FlashAttention-2 (or its backward) on H/P heads of all N rows."""
    if backward:
        one = sum_counts(k for _, k in iomodel.flash2_backward_kernels(N, N, d, s, Br, Bc, causal))
    else:
        one = iomodel.flash2(N, N, d, s, Br, Bc, causal)
    return [one.times(H // P)] * P


def ulysses_link(N, d, s, P, H, *, backward=False) -> tuple[list[int], list[int]]:
    """Bytes each device sends in (the all-to-all before the attention, the one after it), H heads."""
    n = sizes(N, P, "contiguous")
    before, after = (1, 3) if backward else (3, 1)  # dO there, dQ dK dV back; or q k v there, O back
    return ([before * x * d * s * (H - H // P) for x in n], [after * (N - x) * (H // P) * d * s for x in n])


@dataclass(frozen=True)
class Step:
    """One step of a pass across devices: the slowest device's compute and transfer, in seconds."""

    label: str
    compute: float
    transfer: float

    @property
    def overlapped(self) -> float:
        """The step's time when the transfer runs beside the compute: max(compute, transfer)."""
        return max(self.compute, self.transfer)

    @property
    def serial(self) -> float:
        """The step's time when it does not: compute + transfer."""
        return self.compute + self.transfer

    @property
    def bound(self) -> str:
        """ "compute", "transfer" or "—" (nothing done)."""
        if self.compute == self.transfer == 0:
            return "—"
        return "compute" if self.compute >= self.transfer else "transfer"


def step(label: str, counts: list[Counts], sent: list[int], heads: int, hw: Hardware, link: Link, dtype: str) -> Step:
    """A step from every device's counts and bytes sent (one head), for `heads` heads sent as one message."""
    compute = max((iomodel.roofline(c.times(heads), hw, dtype).seconds for c in counts), default=0.0)
    return Step(label, compute, max((link.seconds(b * heads) for b in sent), default=0.0))


def ring_time(N, d, s, P, sharding, causal, Br, Bc, heads, hw, link, dtype, *, backward=False) -> list[Step]:
    """The ring pass as steps: the zeroing, ring steps 0 … P − 1, (backward: dK, dV home,) the casts."""
    first, last = ring_ends(N, d, s, P, sharding, backward=backward)
    steps = ring_steps(N, d, s, P, sharding, causal, Br, Bc, backward=backward)
    sent = ring_link_steps(N, d, s, P, sharding, backward=backward)
    idle = [0] * P
    out = [step("zero the accumulators", first, idle, heads, hw, link, dtype)]
    out += [step(f"ring step {t}", steps[t], sent[t], heads, hw, link, dtype) for t in range(P)]
    if len(sent) > P:
        out.append(step("dK, dV home", [NOTHING] * P, sent[P], heads, hw, link, dtype))
    return [*out, step("cast to the storage dtype", last, idle, heads, hw, link, dtype)]


def ulysses_time(N, d, s, P, H, causal, Br, Bc, batch, hw, link, dtype, *, backward=False) -> list[Step]:
    """Ulysses as three steps: all-to-all, attention on H/P heads, all-to-all (nothing to overlap them with)."""
    before, after = ulysses_link(N, d, s, P, H, backward=backward)
    work = ulysses_device(N, d, s, P, H, causal, Br, Bc, backward=backward)
    idle, nothing = [0] * P, [NOTHING] * P
    return [
        step("all-to-all: sequence → heads", nothing, before, batch, hw, link, dtype),
        step(f"attention on {H // P} of {H} heads", work, idle, batch, hw, link, dtype),
        step("all-to-all: heads → sequence", nothing, after, batch, hw, link, dtype),
    ]


def min_shard(hw: Hardware, link: Link, dtype: str, s: int) -> int:
    """The fewest rows per shard for which a ring step's attention (4·n²·d FLOPs, unmasked) takes as long as
    sending the next K/V shard (2·n·d·s bytes): n ≥ s·peak / (2·bandwidth), whatever d and the heads."""
    return -(-s * int(hw.peak(dtype)) // (2 * int(link.bandwidth)))
