"""Closed-form HBM traffic and work of each algorithm: the paper's Theorem 2, made exact.

N query rows, Nk key rows, head dim d, storage itemsize s, float32 statistics (4 bytes).
Ragged last blocks count at their real size. A test holds every simulated ledger equal
to these formulas, byte for byte.
"""

from dataclasses import dataclass
from math import ceil

from sim.hardware import Hardware

F = 4  # bytes of a float32 statistic (ℓ, m, L)


@dataclass(frozen=True)
class Counts:
    """HBM bytes read and written, matmul FLOPs (2·m·n·k each) and exponentials evaluated."""

    hbm_read_bytes: int
    hbm_write_bytes: int
    flops: int
    exps: int

    @property
    def hbm_bytes(self) -> int:
        """Read plus written."""
        return self.hbm_read_bytes + self.hbm_write_bytes

    def times(self, k: int) -> "Counts":
        """These counts for k independent heads."""
        return Counts(self.hbm_read_bytes * k, self.hbm_write_bytes * k, self.flops * k, self.exps * k)


def standard(N: int, Nk: int, d: int, s: int) -> Counts:
    """Algorithm 0: read Q, K; write S; read S; write P; read P, V; write O (each once)."""
    return Counts(
        hbm_read_bytes=s * (N * d + 2 * Nk * d + 2 * N * Nk),
        hbm_write_bytes=s * (2 * N * Nk + N * d),
        flops=4 * N * Nk * d,
        exps=N * Nk,
    )


def flash1(N: int, Nk: int, d: int, s: int, Bc: int) -> Counts:
    """Algorithm 1: K, V read once; Q_i, O_i, ℓ_i, m_i read and O_i, ℓ_i, m_i written once per K/V block."""
    Tc = ceil(Nk / Bc)
    return Counts(
        hbm_read_bytes=s * (2 * Nk * d + Tc * 2 * N * d) + F * Tc * 2 * N,
        hbm_write_bytes=s * N * d + F * 2 * N + Tc * (s * N * d + F * 2 * N),
        flops=4 * N * Nk * d,
        exps=N * Nk + 2 * N * Tc,
    )


def visible_blocks(i: int, N: int, Nk: int, Br: int, Bc: int, causal: bool) -> int:
    """How many K/V blocks (a prefix j = 0, 1, …) Q block i must read."""
    Tc = ceil(Nk / Bc)
    if not causal:
        return Tc
    last = min((i + 1) * Br, N) - 1 + Nk - N  # the last key the block's last row may see
    return 0 if last < 0 else min(Tc, last // Bc + 1)


def flash2(N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False) -> Counts:
    """FlashAttention-2: Q read once; K, V once per Q block (causal: only blocks some row sees); O, L written once."""
    reads, flops, exps = s * N * d, 0, 0
    for i in range(ceil(N / Br)):
        rows = min((i + 1) * Br, N) - i * Br
        blocks = visible_blocks(i, N, Nk, Br, Bc, causal)
        keys = min(Nk, blocks * Bc)
        reads += s * 2 * keys * d
        flops += 4 * rows * keys * d
        exps += rows * keys + rows * blocks
    return Counts(reads, s * N * d + F * N, flops, exps)


def counts(algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False) -> Counts:
    """The closed form of `algorithm` ("standard", "flash1" or "flash2") for one head."""
    if algorithm == "standard":
        return standard(N, Nk, d, s)
    if algorithm == "flash1":
        return flash1(N, Nk, d, s, Bc)
    return flash2(N, Nk, d, s, Br, Bc, causal)


@dataclass(frozen=True)
class Roofline:
    """Time estimate of one kernel: the slower of moving its bytes and doing its FLOPs."""

    seconds: float
    memory_seconds: float
    compute_seconds: float
    intensity: float  # FLOPs per HBM byte

    @property
    def bound(self) -> str:
        """"memory" or "compute": which side of the roofline sets the time."""
        return "memory" if self.memory_seconds >= self.compute_seconds else "compute"


def roofline(c: Counts, hw: Hardware, dtype: str) -> Roofline:
    """time = max(FLOPs / peak FLOP/s, bytes / HBM bandwidth)."""
    mem = c.hbm_bytes / hw.hbm_bandwidth
    comp = c.flops / hw.peak(dtype)
    return Roofline(max(mem, comp), mem, comp, c.flops / c.hbm_bytes if c.hbm_bytes else float("inf"))
