"""The thread blocks of each kernel, in the order the GPU launches them, with the tiles each step touches.

A kernel's grid is (blocks along the sequence, batch × heads) and the hardware launches blockIdx.x fastest, so
the blocks of one head come one after another. A block is its work (matmul FLOPs, exponentials, other
elementwise operations: as `sim.machine.iomodel` counts them, split per block) and its steps: one per trip of its inner
loop, each the tiles it reads ("r"), writes ("w") or adds into ("rw", an atomic reduction at L2). A tile is named
(tensor, head, block index) and sized in bytes; tiles always fetched together are one
("KV": K_j and V_j; "QdO": Q_i and dO_i; "LD": L_i and D_i). `sim.machine.l2` plays these against an L2 cache.
A persistent kernel (rung 6) launches one block per SM instead, each computing a list of tiles in turn
(`persistent_walk`; causal, the host's list `causal_walk`, which gpu/flash.py hands the kernel): its blocks are
those lists, each tile's steps one after another.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from math import ceil

import numpy as np

from sim.core.dtypes import F
from sim.machine.iomodel import row_blocks

Access = tuple[tuple, int, str]  # ((tensor, head, index…), bytes, "r" | "w" | "rw")


@dataclass(frozen=True)
class Block:
    """One thread block: its work and, lazily, its steps."""

    flops: int
    exps: int
    elementwise: int
    steps: Callable[[], Iterator[list[Access]]]
    tiles: int = 0  # Br × Bc tile pairs it computes
    prologue: int = 0  # bytes its first step loads before its first matmul can start (nothing to overlap yet)
    epilogue: int = 0  # bytes it stores after its last matmul (nothing left to overlap them)
    atomics: int = 0  # bytes it adds into global memory at L2 (dQ_i: float32 atomics, or TMA reduce-adds)
    parts: tuple["Block", ...] = ()  # a persistent block: the tiles it computes in turn (`chained`); () for one tile
    tile: tuple[int, ...] = ()  # the forward's (plane, Q block i) of a one-tile block (gpu.lab.block_stamps finds it)


@dataclass(frozen=True)
class Kernel:
    name: str
    blocks: list[Block]  # in launch order


def _sizes(n: int, b: int) -> list[int]:
    """The sizes of the ceil(n / b) blocks of n rows (the last may be ragged)."""
    return [min(b, n - i * b) for i in range(ceil(n / b))]


QUAD = 4  # threads holding one row of S_ij in a wgmma (or mma.sync) accumulator: each computes the row's statistics


def flash2_forward(N, Nk, d, s, Br, Bc, causal=False, heads=1, sms=0, o_buffer=False, whole_tiles=False) -> Kernel:
    """FlashAttention-2's forward (rungs 2, 3, 6): a block per Q block i; causal grids run the longest rows first.
    `sms` > 0: rung 6's persistent launch, one block per SM walking the tiles in the order `persistent_walk` gives.
    `o_buffer` (rung 6's O_BUF): O_i leaves by TMA from an SRAM buffer of its own while the block goes on to its next
    tile, so a tile's exposed stores (`Block.epilogue`) are L_i's alone but for the block's last tile, whose store the
    block waits for before it ends (06_flash2_wgmma_tma.cu: bulk_wait<0>); the bytes reach L2 all the same. The
    consumers' writes of O_i into that buffer are not counted, as no SRAM traffic of rung 6 is (`smem_per_tile`).
    `whole_tiles` (rung 6, `Launch.whole_tiles`): a block's matmuls and exponentials are the kernel's, not the
    closed form's: every row of a Br × Bc tile pair (a ragged last Q block's too: each warpgroup's wgmma covers 64
    rows) and every key of each K/V block it sees (masked and ragged ones too), 4·Br·Bc·d FLOPs and Br·Bc
    exponentials a pair; and each of the QUAD threads that hold a row computes the row's rescale exp(m − m_new)
    once a pair and 1/ℓ_i once a tile: ncu counts 1 + 4/Bc MUFU operations per score (run 40-model9)."""
    cols = _sizes(Nk, Bc)
    rbs = list(enumerate(row_blocks(N, Nk, Br, Bc, causal)))
    order = rbs[::-1] if causal else rbs

    def block(h, i, b, stores_o=True) -> Block:
        r, keys = b.rows, b.keys_seen

        def steps():
            first = [(("Q", h, i), s * r * d, "r")]
            for j in range(b.seen):
                yield (first if j == 0 else []) + [(("KV", h, j), 2 * s * cols[j] * d, "r")]
            yield ([] if b.seen else first) + [(("O", h, i), s * r * d, "w"), (("L", h, i), F * r, "w")]

        # iomodel.flash2 per block: τ·, rowmax, S − m, rowsum per score; 4 per row and α·O_i per tile; the mask; ÷ℓ, log, +
        work = 4 * r * keys + b.seen * (4 * r + r * d) + r * (keys - b.keys_full) + r * d + 2 * r
        loads = s * r * d + (2 * s * cols[0] * d if b.seen else 0)  # Q_i, K_0 and V_0
        stores = (s * r * d if stores_o else 0) + F * r  # O_i (exposed unless it leaves through O_BUF), L_i
        if whole_tiles:
            flops, exps = 4 * Br * b.seen * Bc * d, Br * b.seen * Bc + QUAD * Br * (b.seen + 1)
        else:
            flops, exps = 4 * r * keys * d, r * keys + r * b.seen
        return Block(flops, exps, work, steps, b.seen, loads, stores, tile=(h, i))

    if not sms:
        return Kernel("FlashAttention-2 forward", [block(h, i, b) for h in range(heads) for i, b in order])
    walks = persistent_walk(N, Nk, Br, Bc, heads, causal, sms)
    blocks = [
        chained([block(h, i, rbs[i][1], not o_buffer or n == len(walk) - 1) for n, (h, i) in enumerate(walk)])
        for walk in walks
    ]
    return Kernel("FlashAttention-2 forward, persistent", blocks)


def persistent_walk(
    N: int, Nk: int, Br: int, Bc: int, planes: int, causal: bool, sms: int
) -> list[list[tuple[int, int]]]:
    """The tiles (plane, i) each thread block of rung 6's persistent launch computes, in order, one list per block
    (06_flash2_wgmma_tma.cu, `for_each_tile`; gpu/flash.py's grid). Full: a *unit* is a Q block i of a plane,
    numbered plane-major (plane · Tr + i); the grid is min(units, SMs) blocks, and block b takes units b, b + grid,
    b + 2·grid, … Causal: the host's list (`causal_walk`, WALK, the launcher's for plain and GQA calls), block b its
    rows b, b + grid, …, −1 rows none.

    The kernel's blocks: with TICKETS (d = 128, long rows: gpu/geometry.py `tickets`) a block takes the next unit of
    this order from a ticket when it is ready (the causal list without its −1 rows): the units at work are ~grid
    consecutive ones whatever the blocks' paces (which block takes which is not this list's); elsewhere block b walks
    b, b + grid, …, and paces 0.2–0.5% apart drift 1–2 tiles by the last rounds (gpu/NOTES.md runs 41-dram12,
    42-sched15). The lockstep below is the first-order picture of both.

    How the model runs this (`sim.machine.l2.play`, lockstep: every block makes one step per tick): the blocks at
    work at once hold units grid apart in that numbering, so they span two or three planes; in a causal unit the
    long half reads K_0 … K_{Tr−1−q} and the short half starts again at K_0, so blocks of one plane read K/V blocks
    from all over the plane at the same tick, where a one-block-per-tile grid reads them together. Blocks drift apart
    only by the steps their units differ in (a lone middle block, ragged last blocks, the causal walk's last rounds of
    single tiles); the time a step takes is taken the same for every step (no clocks, no contention: the drift that
    measured ones cause is not modelled)."""
    Tr = ceil(N / Br)
    if causal:
        units = causal_walk(planes, N, Nk, Br, Bc, sms).tolist()
    else:
        units = [[plane, i, -1, 0] for plane in range(planes) for i in range(Tr)]
    grid = min(len(units), sms)
    return [[(p, i) for p, a, b, _ in units[x::grid] if p >= 0 for i in (a, b) if i >= 0] for x in range(grid)]


def causal_walk(planes: int, n: int, nk: int, br: int, bc: int, blocks: int) -> np.ndarray:
    """The units of rung 6's persistent causal walk (WALK) for `blocks` thread blocks, laid out as gpu/flash.py's
    packed_units: rows (plane, first tile, second tile or −1, 0), thread block x computes rows x, x + blocks, …; −1
    rows: none. Every whole round but the last is the plain walk's (a unit the pair (Tr − 1 − q, q) of one
    plane, the longer first, a lone middle block when Tr is odd: their K/V blocks add up to about Tr + 1 for every q;
    units plane-major, unit u to block u mod blocks); the rest is dealt tile by tile, heaviest first, each to the
    block with the least work so far (K/V blocks read, plus one a tile for its start and end). The plain walk's last
    round leaves blocks idle: 2048 pairs on 132 blocks are 15.5 rounds, the busiest block 3.1% above the mean (run
    39-fwd4). gpu/flash.py hands this list to the kernel; `persistent_walk` gives the model the same."""
    tr = -(-n // br)
    per = (tr + 1) // 2
    q = np.arange(per)
    first, second = tr - 1 - q, np.where(q != tr - 1 - q, q, -1)
    units = np.stack([np.repeat(np.arange(planes), per), np.tile(first, planes), np.tile(second, planes),
                      np.zeros(planes * per, dtype=np.int64)], axis=1)  # fmt: skip
    if len(units) <= blocks:
        return units.astype(np.int32)
    last_key = np.minimum((np.arange(tr) + 1) * br, n) - 1 + nk - n  # the last key a tile's rows see
    work = np.clip(last_key // bc + 1, 0, -(-nk // bc)) + 1  # per tile: K/V blocks + 1
    kept = max(0, len(units) // blocks - 1) * blocks
    load = np.zeros(blocks)
    np.add.at(
        load, np.arange(kept) % blocks, work[units[:kept, 1]] + np.where(units[:kept, 2] >= 0, work[units[:kept, 2]], 0)
    )
    tail = [(plane, i) for plane, a, b, _ in units[kept:] for i in (a, b) if i >= 0]
    tail.sort(key=lambda t: -work[t[1]])  # heaviest first; equal work stays in plane order
    dealt = [[] for _ in range(blocks)]
    for plane, i in tail:
        x = int(np.argmin(load))
        dealt[x].append((plane, i, -1, 0))
        load[x] += work[i]
    rounds = max(len(d) for d in dealt)
    table = np.full((rounds, blocks, 4), -1, dtype=np.int64)
    for x, rows in enumerate(dealt):
        if rows:
            table[: len(rows), x] = rows
    return np.concatenate([units[:kept], table.reshape(-1, 4)]).astype(np.int32)


def chained(tiles: list[Block]) -> Block:
    """One thread block that computes `tiles` one after another (rung 6's persistent block): their work and steps in
    order, the first tile's loads (`prologue`) and every tile's stores (`epilogue`: the consumers issue them between
    tiles); a later tile's first loads overlap the end of the tile before (`sim.machine.timing`, "refill")."""

    def steps():
        for t in tiles:
            yield from t.steps()

    return Block(
        sum(t.flops for t in tiles), sum(t.exps for t in tiles), sum(t.elementwise for t in tiles), steps,
        sum(t.tiles for t in tiles), tiles[0].prologue, sum(t.epilogue for t in tiles), parts=tuple(tiles),
    )  # fmt: skip


def flash2_backward(N, Nk, d, s, Br, Bc, causal=False, heads=1, acc=F, dq_adders=1) -> list[Kernel]:
    """FlashAttention-2's backward as rungs 5 and 7 run it: the pre-pass (dQ = 0 in an accumulator of `acc` bytes
    per element, D = rowsum(dO ∘ O)), a block per K/V block j looping over the Q blocks that see it (Q_i, dO_i,
    L_i and D_i read once per step; dQ_i added into the accumulator at L2), then dQ rounded to the storage dtype.
    `dq_adders`: times each element of dQ_i is added per step (1; 2 for rung 7 without SPLIT_DQ, where each
    consumer warpgroup adds its own 64 keys' share of all of dQ_i)."""
    rows, cols = _sizes(N, Br), _sizes(Nk, Bc)
    rbs = row_blocks(N, Nk, Br, Bc, causal)
    full = [ceil(b.keys_full / Bc) for b in rbs]  # blocks j < full[i] need no mask for Q block i

    def prepass(h, i, r) -> Block:
        def steps():
            yield [(("OdO", h, i), 2 * s * r * d, "r"), (("dQacc", h, i), acc * r * d, "w"), (("D", h, i), F * r, "w")]

        return Block(0, 0, 2 * r * d, steps)

    seers = [[i for i, b in enumerate(rbs) if j < b.seen] for j in range(len(cols))]  # the Q blocks that see block j

    def main(h, j, c, work) -> Block:
        seen_by = seers[j]

        def steps():
            first = [(("KV", h, j), 2 * s * c * d, "r")]
            for n, i in enumerate(seen_by):
                r = rows[i]
                tiles = [(("QdO", h, i), 2 * s * r * d, "r"), (("LD", h, i), 2 * F * r, "r")]
                yield (first if n == 0 else []) + tiles + [(("dQacc", h, i), acc * r * d, "rw")] * dq_adders
            yield ([] if seen_by else first) + [(("dKdV", h, j), 2 * s * c * d, "w")]

        r0 = rows[seen_by[0]] if seen_by else 0  # K_j, V_j, then Q_i, dO_i, L_i, D_i of the first Q block
        loads = 2 * s * c * d + (2 * s * r0 * d + 2 * F * r0 if seen_by else 0)
        added = dq_adders * acc * d * sum(rows[i] for i in seen_by)
        return Block(*work, steps, len(seen_by), loads, 2 * s * c * d, added)

    def main_work(j, c) -> tuple[int, int, int]:
        """(flops, exps, elementwise) of block j: iomodel's per tile, τ·, S − L, dP − D, P ∘ (4rc), τ·dQ (rd),
        τ·dK (cd), and the mask where some row of the tile may not see some key."""
        pairs = sum(rows[i] for i in seers[j]) * c
        work = sum(4 * rows[i] * c + rows[i] * d + c * d + rows[i] * c * (j >= full[i]) for i in seers[j])
        return 10 * pairs * d, pairs, work

    def rounding(h, i, r) -> Block:
        def steps():
            yield [(("dQacc", h, i), acc * r * d, "r"), (("dQ", h, i), s * r * d, "w")]

        return Block(0, 0, r * d, steps)

    works = [main_work(j, c) for j, c in enumerate(cols)]
    return [
        Kernel("dQ = 0, D = rowsum(dO ∘ O)", [prepass(h, i, r) for h in range(heads) for i, r in enumerate(rows)]),
        Kernel(
            "FlashAttention-2 backward",
            [main(h, j, c, w) for h in range(heads) for (j, c), w in zip(enumerate(cols), works, strict=True)],
        ),
        Kernel("dQ rounded", [rounding(h, i, r) for h in range(heads) for i, r in enumerate(rows)]),
    ]


def standard_forward(N, Nk, d, s, Br, Bc, causal=False, heads=1) -> list[Kernel]:
    """Algorithm 0's three kernels, a block per Br rows of S: S_i = τQ_iKᵀ, P_i = softmax(S_i), O_i = P_iV.
    Work is split evenly by rows (standard attention does the same work for every row)."""
    rows, cols = _sizes(N, Br), _sizes(Nk, Bc)
    e = 4 + causal  # mask, rowmax, S − m, rowsum, ÷ℓ per score (iomodel.standard_kernels)

    def qk(h, i, r) -> Block:
        def steps():
            for j, c in enumerate(cols):
                yield [(("Q", h, i), s * r * d, "r")] * (j == 0) + [
                    (("K", h, j), s * c * d, "r"),
                    (("S", h, i, j), s * r * c, "w"),
                ]

        return Block(2 * r * Nk * d, 0, r * Nk, steps, len(cols))

    def softmax(h, i, r) -> Block:
        def steps():
            for j, c in enumerate(cols):
                yield [(("S", h, i, j), s * r * c, "r"), (("P", h, i, j), s * r * c, "w")]

        return Block(0, r * Nk, e * r * Nk, steps, len(cols))

    def pv(h, i, r) -> Block:
        def steps():
            for j, c in enumerate(cols):
                yield [(("P", h, i, j), s * r * c, "r"), (("V", h, j), s * c * d, "r")]
            yield [(("O", h, i), s * r * d, "w")]

        return Block(2 * r * Nk * d, 0, 0, steps, len(cols))

    return [
        Kernel(name, [make(h, i, r) for h in range(heads) for i, r in enumerate(rows)])
        for name, make in (("S = τQKᵀ", qk), ("P = softmax(S)", softmax), ("O = PV", pv))
    ]


def flash1_forward(N, Nk, d, s, Br, Bc, causal=False, heads=1, work=(0, 0, 0)) -> Kernel:
    """Algorithm 1 as FlashAttention's first kernel ran it: one block per head, K/V blocks outside, Q blocks inside;
    `work` is one head's (flops, exps, elementwise) from its closed form."""
    rows, cols = _sizes(N, Br), _sizes(Nk, Bc)

    def block(h) -> Block:
        def stats(i, kind):
            r = rows[i]
            return [(("O", h, i), s * r * d, kind), (("l", h, i), F * r, kind), (("m", h, i), F * r, kind)]

        def steps():
            yield [a for i in range(len(rows)) for a in stats(i, "w")]  # line 2: O = 0, ℓ = 0, m = −∞ to HBM
            for j, c in enumerate(cols):
                for i, r in enumerate(rows):
                    kv = [(("KV", h, j), 2 * s * c * d, "r")] * (i == 0)
                    yield [*kv, (("Q", h, i), s * r * d, "r"), *stats(i, "r"), *stats(i, "w")]

        return Block(*work, steps, len(rows) * len(cols))

    return Kernel("FlashAttention forward", [block(h) for h in range(heads)])
