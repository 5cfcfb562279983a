"""Block sizes: what each algorithm keeps in SRAM, the paper's rule, and the largest blocks that fit.

`footprint` lists the buffers an algorithm holds at its SRAM peak for full Br × Bc
blocks; a test holds it equal to the peak the simulator measures.
"""

from math import ceil

from sim.errors import InputError
from sim.memory import human_bytes

F = 4  # float32: on-chip accumulators and statistics


def footprint(algorithm: str, Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """Bytes of each SRAM buffer at the algorithm's peak, for storage itemsize `s`."""
    if algorithm == "flash2":
        return {
            "Q_i": s * Br * d,
            "K_j": s * Bc * d,
            "V_j": s * Bc * d,
            "O_i": F * Br * d,
            "P̃_ij": F * Br * Bc,
            "ℓ_i, m_i, m_new, α_i": 4 * F * Br,
        }
    if algorithm == "flash1":
        return {
            "K_j": s * Bc * d,
            "V_j": s * Bc * d,
            "Q_i": s * Br * d,
            "O_i": F * Br * d,
            "P̃_ij": F * Br * Bc,
            "ℓ_i, m_i, m̃_ij, ℓ̃_ij, m_i_new, ℓ_i_new, α_i, β_i": 8 * F * Br,
        }
    if algorithm == "standard":  # the larger of the two matmul kernels (the softmax picks its own rows)
        qk = {"Q_i": s * Br * d, "K_j": s * Bc * d, "S_ij": F * Br * Bc}
        pv = {"P_ij": s * Br * Bc, "V_j": s * Bc * d, "O_i": F * Br * d}
        return qk if sum(qk.values()) >= sum(pv.values()) else pv
    raise InputError(f"algorithm: unknown {algorithm!r}; choose standard, flash1 or flash2")


def need(algorithm: str, Br: int, Bc: int, d: int, s: int) -> int:
    """Total SRAM bytes the algorithm needs with these blocks."""
    return sum(footprint(algorithm, Br, Bc, d, s).values())


def paper(sram_bytes: int, d: int, s: int) -> tuple[int, int]:
    """The paper's rule (Algorithm 1, line 1): Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d), M = SRAM size in elements."""
    M = sram_bytes // s
    Bc = ceil(M / (4 * d))
    return min(Bc, d), Bc


def check_fits(algorithm: str, Br: int, Bc: int, d: int, s: int, sram_bytes: int, why: str = "") -> None:
    """Raise InputError naming every buffer if Br × Bc blocks do not fit in `sram_bytes`."""
    parts = footprint(algorithm, Br, Bc, d, s)
    total = sum(parts.values())
    if total > sram_bytes:
        listing = ", ".join(f"{name} {human_bytes(b)}" for name, b in parts.items())
        raise InputError(
            f"blocks: {why}Br={Br}, Bc={Bc}, which need {human_bytes(total)} of SRAM for {algorithm} "
            f"({listing}) but the SRAM holds {human_bytes(sram_bytes)}"
        )


def fit(
    algorithm: str, N: int, Nk: int, d: int, s: int, sram_bytes: int, Br: int | None = None, Bc: int | None = None
) -> tuple[int, int]:
    """The largest blocks that fit: the largest square power of two (capped at N, Nk), then the
    block that sets the traffic (Br for flash2, Bc for flash1) doubled while it still fits.
    A block given as `Br` or `Bc` is kept as it is.
    """

    def fits(br: int, bc: int) -> bool:
        return need(algorithm, br, bc, d, s) <= sram_bytes

    def grow(b: int, cap: int, ok) -> int:
        while b < cap and ok(min(2 * b, cap)):
            b = min(2 * b, cap)
        return b

    if Br is None and Bc is None:
        if not fits(1, 1):
            check_fits(algorithm, 1, 1, d, s, sram_bytes, "even the smallest blocks ")
        B = grow(1, max(N, Nk), lambda b: fits(min(b, N), min(b, Nk)))
        Br, Bc = min(B, N), min(B, Nk)
        if algorithm == "flash2":
            Br = grow(Br, N, lambda b: fits(b, Bc))
        elif algorithm == "flash1":
            Bc = grow(Bc, Nk, lambda b: fits(Br, b))
    elif Bc is None:
        check_fits(algorithm, Br, 1, d, s, sram_bytes)
        Bc = grow(1, Nk, lambda b: fits(Br, b))
    elif Br is None:
        check_fits(algorithm, 1, Bc, d, s, sram_bytes)
        Br = grow(1, N, lambda b: fits(b, Bc))
    return Br, Bc
