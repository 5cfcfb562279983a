"""Block sizes: what each algorithm keeps in SRAM, the paper's rule, and the largest blocks that fit.

`footprint` lists the buffers an algorithm holds at its SRAM peak for full Br × Bc
blocks; a test holds it equal to the peak the simulator measures.
"""

from collections.abc import Callable
from math import ceil

from sim.dtypes import F
from sim.errors import InputError
from sim.format import human_bytes


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
    refuse_overflow(footprint(algorithm, Br, Bc, d, s), Br, Bc, sram_bytes, algorithm, why)


def refuse_overflow(parts: dict[str, int], Br: int, Bc: int, sram_bytes: int, what: str, why: str = "") -> None:
    """Raise InputError listing `parts` (buffer → bytes) if together they exceed `sram_bytes`."""
    total = sum(parts.values())
    if total > sram_bytes:
        listing = ", ".join(f"{name} {human_bytes(b)}" for name, b in parts.items())
        raise InputError(
            f"blocks: {why}Br={Br}, Bc={Bc}, which need {total:,} B ({human_bytes(total)}) of SRAM for {what} "
            f"({listing}) but the SRAM holds {sram_bytes:,} B ({human_bytes(sram_bytes)})"
        )


def largest(
    parts: Callable[[int, int], dict[str, int]],
    N: int,
    Nk: int,
    sram_bytes: int,
    what: str,
    grow: str | None = None,
    Br: int | None = None,
    Bc: int | None = None,
    check_given: bool = False,
) -> tuple[int, int]:
    """The largest blocks whose buffers `parts(Br, Bc)` fit: the largest square power of two (capped
    at N, Nk), then the block that sets the traffic (`grow`: "rows" or "cols") doubled while it fits.
    A block given as `Br` or `Bc` is kept as it is and the other grown; `check_given` refuses given
    blocks that do not fit before anything runs.
    """

    def fits(br: int, bc: int) -> bool:
        return sum(parts(br, bc).values()) <= sram_bytes

    def double(b: int, cap: int, ok) -> int:
        while b < cap and ok(min(2 * b, cap)):
            b = min(2 * b, cap)
        return b

    def refuse(br: int, bc: int, why: str = "") -> None:
        refuse_overflow(parts(br, bc), br, bc, sram_bytes, what, why)

    if Br is None and Bc is None:
        refuse(1, 1, "even the smallest blocks ")
        B = double(1, max(N, Nk), lambda b: fits(min(b, N), min(b, Nk)))
        Br, Bc = min(B, N), min(B, Nk)
        if grow == "rows":
            Br = double(Br, N, lambda b: fits(b, Bc))
        elif grow == "cols":
            Bc = double(Bc, Nk, lambda b: fits(Br, b))
    elif Bc is None:
        refuse(Br, 1)
        Bc = double(1, Nk, lambda b: fits(Br, b))
    elif Br is None:
        refuse(1, Bc)
        Br = double(1, N, lambda b: fits(b, Bc))
    elif check_given:
        refuse(min(Br, N), min(Bc, Nk))
    return Br, Bc


def fit(
    algorithm: str, N: int, Nk: int, d: int, s: int, sram_bytes: int, Br: int | None = None, Bc: int | None = None
) -> tuple[int, int]:
    """The largest blocks that fit the forward pass (`largest`): Br grows for flash2, whose Tr sets how
    often K and V are read; Bc for flash1, whose Tc sets how often Q, O, ℓ and m make the round trip.
    """
    grow = {"flash2": "rows", "flash1": "cols"}.get(algorithm)
    return largest(lambda br, bc: footprint(algorithm, br, bc, d, s), N, Nk, sram_bytes, algorithm, grow, Br, Bc)
