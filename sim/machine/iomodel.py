"""Closed-form HBM traffic and work of each algorithm: the paper's Theorem 2, made exact.

N query rows, Nk key rows, head dim d, storage itemsize s, float32 statistics (4 bytes).
Ragged last blocks count at their real size. A test holds every simulated ledger equal
to these formulas, byte for byte, forward and backward.

Work comes in three kinds, counted apart:
  flops        matmul FLOPs, 2·m·n·k per product (adding a product into its output block
               is part of it);
  exps         exponentials evaluated;
  elementwise  every other arithmetic operation on an on-chip array, one per element of
               its result (add, subtract, multiply, divide, max, a mask's select, log),
               a row reduction (rowmax, rowsum) one per element it reduces. The guards that
               keep a row which sees no key at zero are not counted.
"""

from dataclasses import dataclass
from math import ceil

from sim.core.dtypes import F
from sim.machine import mask
from sim.machine.blocks import chunks
from sim.machine.hardware import Hardware
from sim.machine.row_sums import RowSums, row_sums


@dataclass(frozen=True)
class Counts:
    """HBM bytes read and written, matmul FLOPs (2·m·n·k each), exponentials and other elementwise work."""

    hbm_read_bytes: int
    hbm_write_bytes: int
    flops: int
    exps: int
    elementwise: int = 0

    @property
    def hbm_bytes(self) -> int:
        """Read plus written."""
        return self.hbm_read_bytes + self.hbm_write_bytes

    def times(self, k: int) -> "Counts":
        """These counts for k independent heads."""
        return Counts(*(k * x for x in vars(self).values()))

    def __add__(self, b: "Counts") -> "Counts":  # field by field (astuple deep-copies: 10⁶ adds in a big ring)
        return Counts(self.hbm_read_bytes + b.hbm_read_bytes, self.hbm_write_bytes + b.hbm_write_bytes,
                      self.flops + b.flops, self.exps + b.exps, self.elementwise + b.elementwise)  # fmt: skip


Kernels = list[tuple[str, Counts]]  # a pass as the kernels it launches, each with its counts


@dataclass(frozen=True)
class RowBlock:
    """Q block i against the K/V blocks: which of them its rows see (the causal mask's shape)."""

    rows: int  # its real size (the last block may be ragged)
    seen: int  # K/V blocks some row sees: a prefix j = 0 … seen − 1
    keys_seen: int  # keys in those blocks
    keys_full: int  # keys in the blocks every row sees in full (no mask needed there)


def row_blocks(N: int, Nk: int, Br: int, Bc: int, causal: bool, rule: mask.Rule | None = None) -> list[RowBlock]:
    """The Tr row blocks of Q's N rows, with the K/V blocks each one sees under `rule` (None: the causal flag's)."""
    rule = rule or mask.rule(N, Nk, causal)
    out = []
    for i in range(ceil(N / Br)):
        rows = (i * Br, min((i + 1) * Br, N))
        seen, full = rule.seen_blocks(rows, Bc), rule.full_blocks(rows, Bc)
        out.append(RowBlock(rows[1] - rows[0], len(seen), _keys(seen, Bc, Nk), _keys(full, Bc, Nk)))
    return out


def _keys(blocks: range, Bc: int, Nk: int) -> int:
    """Keys in a run of K/V blocks (the last may be ragged)."""
    return min(Nk, blocks.stop * Bc) - blocks.start * Bc if blocks else 0


def sums(N: int, Nk: int, Br: int, Bc: int, causal: bool, rule: mask.Rule | None = None) -> RowSums:
    """`row_blocks`' fields summed: in O(log N) where only the causal flag masks (`sim.machine.row_sums`), else
    run by run under a window or GQA's packed rows (`rule`). A block's fields depend only on its rows' first and last
    positions and its size, so a run of whole blocks inside one position (GQA's g ≥ Br packed rows of a position) is
    one step: at most two steps a position and one a block, min(Tr, 2·N/g + 1) in all."""
    if rule is None:
        return row_sums(N, Nk, Br, Bc, causal)
    seen = keys = full = r_seen = r_keys = r_full = r_any = 0
    i, Tr = 0, ceil(N / Br)
    while i < Tr:
        rows = (i * Br, min((i + 1) * Br, N))
        p0, p1 = rule.positions(rows)
        # blocks i … k − 1 lie whole inside position p0 (rows end ≤ (p0 + 1)·g): their fields are block i's
        k = min((p0 + 1) * rule.group, N) // Br if p0 == p1 and rows[1] - rows[0] == Br else i + 1
        s, f = rule.seen_blocks(rows, Bc), rule.full_blocks(rows, Bc)
        n, r, ks, kf = k - i, rows[1] - rows[0], _keys(s, Bc, Nk), _keys(f, Bc, Nk)
        seen, keys, full = seen + n * len(s), keys + n * ks, full + n * kf
        r_seen, r_keys, r_full = r_seen + n * r * len(s), r_keys + n * r * ks, r_full + n * r * kf
        r_any += n * r if s else 0
        i = k
    return RowSums(seen, keys, full, r_seen, r_keys, r_full, r_any)


def standard(N: int, Nk: int, d: int, s: int, causal: bool = False) -> Counts:
    """Algorithm 0: read Q, K; write S; read S; write P; read P, V; write O (each once)."""
    return sum_counts(k for _, k in standard_kernels(N, Nk, d, s, causal=causal))


def standard_kernels(N: int, Nk: int, d: int, s: int, Br=None, Bc=None, causal=False, dropout=False) -> Kernels:
    """Algorithm 0's three kernels (its counts do not depend on the blocks; it has no dropout)."""
    return [
        ("S = τQKᵀ", Counts(s * (N * d + Nk * d), s * N * Nk, 2 * N * Nk * d, 0, N * Nk)),  # τ·
        # mask, rowmax, S − m, rowsum, ÷ℓ
        ("P = softmax(S)", Counts(s * N * Nk, s * N * Nk, 0, N * Nk, (4 + causal) * N * Nk)),
        ("O = PV", Counts(s * (N * Nk + Nk * d), s * N * d, 2 * N * Nk * d, 0, 0)),
    ]


def flash1(N: int, Nk: int, d: int, s: int, Bc: int, causal: bool = False, dropout: bool = False, *, Br=None) -> Counts:
    """Algorithm 1: K, V read once; Q_i, O_i, ℓ_i, m_i read and O_i, ℓ_i, m_i written once per K/V block.

    Every tile is computed (Algorithm 1 skips none); a causal count of the mask's work
    needs the row block size `Br`.
    """
    Tc = ceil(Nk / Bc)
    # per tile: τ·, rowmax, S − m̃, rowsum (4rc); 6 per row (line 11) + 1 (line 12); 4rd (line 12)
    elementwise = 4 * N * Nk + Tc * (7 * N + 4 * N * d) + dropout * N * Nk
    if causal:
        if Br is None:
            raise TypeError("flash1: the causal mask's work depends on the row block; pass Br")
        elementwise += N * Nk - row_sums(N, Nk, Br, Bc, True).r_full  # Σ_i r_i·(Nk − full_i)
    return Counts(
        hbm_read_bytes=s * (2 * Nk * d + Tc * 2 * N * d) + F * Tc * 2 * N,
        hbm_write_bytes=s * N * d + F * 2 * N + Tc * (s * N * d + F * 2 * N),
        flops=4 * N * Nk * d,
        exps=N * Nk + 2 * N * Tc,
        elementwise=elementwise,
    )


def visible_blocks(i: int, N: int, Nk: int, Br: int, Bc: int, causal: bool) -> int:
    """How many K/V blocks (a prefix j = 0, 1, …) Q block i must read."""
    return len(mask.rule(N, Nk, causal).seen_blocks((i * Br, min((i + 1) * Br, N)), Bc))


def flash2(
    N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False, dropout: bool = False, *,
    rule: mask.Rule | None = None, softcap: bool = False, alibi: bool = False,
) -> Counts:  # fmt: skip
    """FlashAttention-2: Q read once (not a block that sees no key); K, V once per Q block (masked: only blocks some
    row sees); O, L written once. `rule` (a window; GQA's packed rows, N then counting every head's), `softcap`,
    `alibi`: `sim.algorithms.scores`."""
    b = sums(N, Nk, Br, Bc, causal, rule)  # Σ over the row blocks i of r_i, seen_i, keys_i, full_i (and products)
    reads = s * b.r_any * d + s * 2 * b.keys * d
    flops = 4 * b.r_keys * d
    exps = (1 + softcap) * b.r_keys + b.r_seen  # P̃_ij, a tanh per score; α_i
    # ÷ℓ_i; log, + for L_i; per tile: τ·, rowmax, S − m, rowsum (4rc) and 4 per row; α·O_i (rd); the mask; dropout;
    # softcap, ALiBi (2rc each)
    elementwise = N * d + 2 * N + (4 + dropout + 2 * softcap + 2 * alibi) * b.r_keys + (4 + d) * b.r_seen
    elementwise += b.r_keys - b.r_full
    return Counts(reads, s * N * d + F * N, flops, exps, elementwise)


def flash1_kernels(N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal=False, dropout=False) -> Kernels:
    """Algorithm 1 as the one kernel it is."""
    return [("FlashAttention forward", flash1(N, Nk, d, s, Bc, causal, dropout, Br=Br))]


def flash2_kernels(N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal=False, dropout=False) -> Kernels:
    """FlashAttention-2's forward as the one kernel it is."""
    return [("FlashAttention-2 forward", flash2(N, Nk, d, s, Br, Bc, causal, dropout))]


# -- the backward pass ---------------------------------------------------------------


def standard_backward_kernels(
    N: int, Nk: int, d: int, s: int, Br=None, Bc=None, causal=False, dropout=False
) -> Kernels:
    """The FlashAttention paper's Algorithm 3 (standard attention backward): five kernels, each operand read once
    (the counts depend neither on the blocks nor, P being zero where the mask hides a key, on the mask)."""
    return [
        ("dV = Pᵀ dO", Counts(s * (N * Nk + N * d), s * Nk * d, 2 * N * Nk * d, 0, 0)),
        ("dP = dO Vᵀ", Counts(s * (N * d + Nk * d), s * N * Nk, 2 * N * Nk * d, 0, 0)),
        # P ∘ dP, rowsum, dP − D, P ∘ (…)
        ("dS = P ∘ (dP − D)", Counts(2 * s * N * Nk, s * N * Nk, 0, 0, 4 * N * Nk)),
        ("dQ = τ dS K", Counts(s * (N * Nk + Nk * d), s * N * d, 2 * N * Nk * d, 0, N * d)),  # τ·
        ("dK = τ dSᵀ Q", Counts(s * (N * Nk + N * d), s * Nk * d, 2 * N * Nk * d, 0, Nk * d)),  # τ·
    ]


def flash1_backward(
    N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False, dropout: bool = False
) -> Counts:
    """FlashAttention's Algorithm 4: dQ, dK, dV zeroed in HBM; per K/V block j, every Q block's
    Q_i, O_i, dO_i, dQ_i, ℓ_i, m_i read and dQ_i written; dK_j, dV_j written once.
    """
    Tc, Tr = ceil(Nk / Bc), ceil(N / Br)
    # per tile: τ·, S − m, ÷ℓ, dP − D, P ∘ (5rc); dO ∘ O and rowsum for D_i, τ·dQ (3rd); τ·dK (cd)
    elementwise = (5 + 2 * dropout) * N * Nk + Tc * 3 * N * d + Tr * Nk * d
    if causal:
        elementwise += N * Nk - row_sums(N, Nk, Br, Bc, True).r_full  # Σ_i r_i·(Nk − full_i)
    return Counts(
        hbm_read_bytes=s * 2 * Nk * d + Tc * (4 * s * N * d + 2 * F * N),
        hbm_write_bytes=s * (N * d + 2 * Nk * d) + Tc * s * N * d + 2 * s * Nk * d,
        flops=10 * N * Nk * d,
        exps=N * Nk,
        elementwise=elementwise,
    )


def flash2_backward_kernels(
    N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False, dropout: bool = False, *,
    rule: mask.Rule | None = None, softcap: bool = False, alibi: bool = False,
) -> Kernels:  # fmt: skip
    """FlashAttention-2's Algorithm 2 as two kernels: the pre-pass (dQ = 0, D = rowsum(dO ∘ O)), then
    per K/V block j, every Q block that sees it reads Q_i, dO_i, L_i, D_i and read-modify-writes dQ_i.
    `rule`, `softcap`, `alibi` as for `flash2`; through the softcap dS_ij ∘ (1 − T_ij²) costs 3 an element.
    """
    b = sums(N, Nk, Br, Bc, causal, rule)  # Σ over the row blocks i of r_i, seen_i, keys_i, full_i (and products)
    reads = 2 * s * Nk * d + (3 * s * d + 2 * F) * b.r_seen
    writes = 2 * s * Nk * d + s * d * b.r_seen
    flops, exps = 10 * b.r_keys * d, (1 + softcap) * b.r_keys
    # per tile: τ·, S − L, dP − D, P ∘ (4rc); τ·dQ (rd), τ·dK (cd); the mask; dropout (P ∘ Z, dP ∘ Z);
    # softcap (÷c, ·c; T², 1 −, ∘), ALiBi (·slope, −)
    elementwise = (4 + 2 * dropout + 5 * softcap + 2 * alibi) * b.r_keys + d * b.r_seen + d * b.keys
    elementwise += b.r_keys - b.r_full
    return [
        ("dQ = 0, D = rowsum(dO ∘ O)", Counts(2 * s * N * d, s * N * d + F * N, 0, 0, 2 * N * d)),
        ("FlashAttention-2 backward", Counts(reads, writes, flops, exps, elementwise)),
    ]


def flash1_backward_kernels(N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal=False, dropout=False) -> Kernels:
    """Algorithm 4 as the one kernel it is."""
    return [("FlashAttention backward", flash1_backward(N, Nk, d, s, Br, Bc, causal, dropout))]


def decoding(
    Nq: int, Nk: int, d: int, s: int, Bc: int, splits: int, causal: bool = False, *, rule: mask.Rule | None = None,
    bounds=None, softcap: bool = False, alibi: bool = False,
) -> Kernels:  # fmt: skip
    """Flash-Decoding's kernels for one head: FlashAttention-2's forward per chunk of keys, writing float32
    partials O_p, lse_p, then the combine (one kernel alone with one split). `rule`: a window, or GQA's packed
    rows (Nq then counts every head's); `bounds`: each split's keys (a paged cache's runs of pages)."""
    rule = rule or mask.rule(Nq, Nk, causal)
    reads, flops, exps, elementwise = splits * s * Nq * d + 2 * s * Nk * d, 0, 0, 0
    for k0, k1 in bounds or chunks(Nk, splits):
        for c0 in range(k0, k1, Bc):
            c1 = min(c0 + Bc, k1)
            c = c1 - c0
            flops += 4 * Nq * c * d
            exps += (1 + softcap) * Nq * c + Nq
            masked = rule.masks and not rule.block_fully_seen((0, Nq), (c0, c1))
            # τ·, rowmax, S − m, rowsum (4·Nq·c), the mask, softcap and ALiBi; max, −, α·ℓ, + per row; α·O_p
            elementwise += (4 + masked + 2 * softcap + 2 * alibi) * Nq * c + 4 * Nq + Nq * d
        elementwise += Nq * d + 2 * Nq  # ÷ℓ; log, +
    if splits == 1:
        return [("FlashAttention-2 forward", Counts(reads, s * Nq * d + F * Nq, flops, exps, elementwise))]
    partials = F * splits * Nq * (d + 1)
    split = Counts(reads, partials, flops, exps, elementwise)
    # max, −, Σ over the P lse's and log, +; per split: −, and ·, + on O_p
    merge = Counts(
        partials, s * Nq * d + F * Nq, 0, 2 * splits * Nq, 3 * splits * Nq + 2 * Nq + splits * Nq * (1 + 2 * d)
    )
    return [("split K/V: partial O_p, lse_p", split), ("combine", merge)]


def sum_counts(parts) -> Counts:
    """The sum of several Counts."""
    return sum(parts, Counts(0, 0, 0, 0, 0))


# -- time ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Roofline:
    """Time estimate of one kernel: the slower of moving its bytes and doing its FLOPs."""

    seconds: float
    memory_seconds: float
    compute_seconds: float
    intensity: float  # FLOPs per HBM byte

    @property
    def bound(self) -> str:
        """ "memory" or "compute": which side of the roofline sets the time."""
        return "memory" if self.memory_seconds >= self.compute_seconds else "compute"


def roofline(c: Counts, hw: Hardware, dtype: str) -> Roofline:
    """time = max(FLOPs / peak FLOP/s, bytes / HBM bandwidth)."""
    mem = c.hbm_bytes / hw.hbm_bandwidth
    comp = c.flops / hw.peak(dtype)
    return Roofline(max(mem, comp), mem, comp, c.flops / c.hbm_bytes if c.hbm_bytes else float("inf"))


def estimate(parts: list[tuple[str, Counts]], hw: Hardware, dtype: str) -> list[tuple[str, Counts, Roofline]]:
    """Each kernel's roofline; the kernels run one after another, so their times add up."""
    return [(name, c, roofline(c, hw, dtype)) for name, c in parts]
