"""How one sequence is split over P devices, and which part of a Q shard sees which part of a K/V shard.

contiguous  device p holds rows p·N/P … (p+1)·N/P − 1 (as even as can be).
zigzag      N is cut in 2P chunks of N/2P rows; device p holds chunk p and chunk 2P − 1 − p, so that
            under a causal mask every device has the same work at every ring step (ring-flash-attention's
            zigzag; Striped Attention stripes rows for the same reason).
A device's chunks sit in its HBM one after another, in increasing global order.
"""

from dataclasses import dataclass

from sim.core.errors import InputError
from sim.machine.blocks import chunks

SHARDINGS = ("contiguous", "zigzag")


@dataclass(frozen=True)
class Piece:
    """Local Q rows `q` of a shard against local K/V rows `kv` of another: unmasked, or causal on the diagonal."""

    q: tuple[int, int]
    kv: tuple[int, int]
    causal: bool

    @property
    def rows(self) -> int:
        return self.q[1] - self.q[0]

    @property
    def keys(self) -> int:
        return self.kv[1] - self.kv[0]


def check(N: int, P: int, sharding: str) -> None:
    """Refuse a sharding that cannot split N rows over P devices."""
    if sharding not in SHARDINGS:
        raise InputError(f"sharding: {sharding!r} is not one of {', '.join(SHARDINGS)}")
    if P > N:
        raise InputError(f"devices: {P} devices for N = {N} rows would leave some without rows; choose 1 … {N}")
    if sharding == "zigzag" and N % (2 * P):
        raise InputError(
            f"sharding: zigzag cuts N = {N} into 2P = {2 * P} equal chunks; choose N a multiple of {2 * P} "
            "or --sharding contiguous"
        )


def shards(N: int, P: int, sharding: str) -> list[list[tuple[int, int]]]:
    """The global rows [r0, r1) of each device's chunks, in the order they sit in its HBM."""
    check(N, P, sharding)
    if sharding == "contiguous":
        return [[c] for c in chunks(N, P)]
    c = N // (2 * P)
    return [[(p * c, (p + 1) * c), ((2 * P - 1 - p) * c, (2 * P - p) * c)] for p in range(P)]


def pieces(q_chunks, kv_chunks, causal: bool) -> list[Piece]:
    """The blocks of work of a Q shard against a K/V shard, in local rows; none where the mask hides everything.

    A shard against itself is one piece, causal on its local rows (its chunks are in global order, so the
    local diagonal is the global one). Between two shards, a chunk of keys either lies wholly before a chunk of
    queries (seen in full) or wholly after it (hidden); adjacent chunks seen alike merge into one piece.
    """
    q_local, kv_local = _local(q_chunks), _local(kv_chunks)
    if not causal or q_chunks == kv_chunks:
        return [Piece((0, q_local[-1][1]), (0, kv_local[-1][1]), causal)]
    seen = []  # (local q rows, local kv rows) per q chunk, kv chunks before it merged
    for (a0, _), qr in zip(q_chunks, q_local, strict=True):
        keys = [kr for (_, b1), kr in zip(kv_chunks, kv_local, strict=True) if b1 <= a0]
        if keys:
            seen.append((qr, _span(keys)))
    merged: list[Piece] = []
    for qr, kr in seen:
        last = merged[-1] if merged else None
        if last and last.kv == kr and last.q[1] == qr[0]:
            merged[-1] = Piece((last.q[0], qr[1]), kr, False)
        else:
            merged.append(Piece(qr, kr, False))
    return merged


def _local(chunks_: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, at = [], 0
    for r0, r1 in chunks_:
        out.append((at, at + r1 - r0))
        at += r1 - r0
    return out


def _span(ranges: list[tuple[int, int]]) -> tuple[int, int]:
    """Contiguous local ranges as one (they are: the chunks seen in full are a prefix of the shard, or all of it)."""
    return ranges[0][0], ranges[-1][1]
