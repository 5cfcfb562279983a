"""Block sizes, the only place: what each listing keeps in SRAM, the paper's rule, and the largest blocks that fit.

A footprint lists the buffers a listing holds at its SRAM peak for full Br × Bc blocks
(storage itemsize s; accumulators and statistics are float32, F bytes); a test holds it
equal to the peak the simulator measures. The registry (`sim.algorithms`) points each
algorithm at its footprints; `footprint`, `need`, `check_fits`, `fit` and `choose` look
them up by the algorithm's name, for its forward pass or (`backward=True`) its backward.
"""

from collections.abc import Callable
from math import ceil

from sim.core.dtypes import F
from sim.core.errors import InputError, SRAMOverflowError
from sim.core.format import bytes_and_units, human_bytes, plural

PAPER_RULE = "the paper's rule Bc = ⌈M/4d⌉, Br = min(Bc, d) gives "

# -- the forward listings ----------------------------------------------------------------


def standard_footprint(Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """Algorithm 0: the larger of its two matmul kernels (its softmax holds whole rows: `softmax_rows`)."""
    qk = {"Q_i": s * Br * d, "K_j": s * Bc * d, "S_ij": F * Br * Bc}
    pv = {"P_ij": s * Br * Bc, "V_j": s * Bc * d, "O_i": F * Br * d}
    return qk if sum(qk.values()) >= sum(pv.values()) else pv


def flash1_footprint(Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """Algorithm 1, at line 12: K_j, V_j, Q_i, O_i, P̃_ij and eight per-row statistics."""
    return {
        "K_j": s * Bc * d,
        "V_j": s * Bc * d,
        "Q_i": s * Br * d,
        "O_i": F * Br * d,
        "P̃_ij": F * Br * Bc,
        "ℓ_i, m_i, m̃_ij, ℓ̃_ij, m_i_new, ℓ_i_new, α_i, β_i": 8 * F * Br,
    }


def flash2_footprint(Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """FlashAttention-2's forward, at line 10: Q_i, K_j, V_j, O_i, P̃_ij and four per-row statistics."""
    return {
        "Q_i": s * Br * d,
        "K_j": s * Bc * d,
        "V_j": s * Bc * d,
        "O_i": F * Br * d,
        "P̃_ij": F * Br * Bc,
        "ℓ_i, m_i, m_new, α_i": 4 * F * Br,
    }


def softmax_rows(N: int, Nk: int, sram_bytes: int) -> int:
    """How many whole rows of S Algorithm 0's softmax (line 2) holds in SRAM: a float32 row, plus m and ℓ."""
    return _whole_rows(N, F * (Nk + 2), Nk, sram_bytes, "standard attention's softmax holds a whole row of S")


# -- the backward listings ---------------------------------------------------------------


def standard_backward_footprint(Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """Algorithm 3: the largest of its four matmul kernels (line 3 holds whole rows: `whole_rows`)."""
    kernels = [
        {"dV_j": F * Bc * d, "P_ij": s * Br * Bc, "dO_i": s * Br * d},  # line 1
        {"dO_i": s * Br * d, "V_j": s * Bc * d, "dP_ij": F * Br * Bc},  # line 2
        {"dQ_i": F * Br * d, "dS_ij": s * Br * Bc, "K_j": s * Bc * d},  # line 4
        {"dK_j": F * Bc * d, "dS_ij": s * Br * Bc, "Q_i": s * Br * d},  # line 5
    ]
    return max(kernels, key=lambda k: sum(k.values()))


def flash1_backward_footprint(Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """Algorithm 4, at line 19: D_i joins everything line 10 loaded, P_ij and dP_ij."""
    return _kv_gradients(Bc, d, s) | {
        "Q_i": s * Br * d,
        "O_i": s * Br * d,
        "dO_i": s * Br * d,
        "dQ_i": s * Br * d,
        "P_ij": F * Br * Bc,
        "dP_ij": F * Br * Bc,
        "ℓ_i, m_i, D_i": 3 * F * Br,
    }


def flash2_backward_footprint(Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """FlashAttention-2's Algorithm 2, at line 14 (P_ij and dS_ij) or line 15 (dS_ij and the updated dQ_i)."""
    base = _kv_gradients(Bc, d, s) | {
        "Q_i": s * Br * d,
        "dO_i": s * Br * d,
        "L_i, D_i": 2 * F * Br,
        "dS_ij": F * Br * Bc,
    }
    return base | ({"P_ij": F * Br * Bc} if Bc >= d else {"dQ_i": F * Br * d})


def softcap_backward_footprint(Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """FlashAttention-2's backward with a softcap: T_ij = tanh(τ Q_i K_jᵀ / c) stays beside P_ij until line 14."""
    base = {name: n for name, n in flash2_backward_footprint(Br, Bc, d, s).items() if name not in ("P_ij", "dQ_i")}
    line14 = {"P_ij": F * Br * Bc, "T_ij": F * Br * Bc}
    return base | (line14 if 2 * Bc >= d else {"dQ_i": F * Br * d})


def whole_rows(N: int, Nk: int, s: int, sram_bytes: int) -> int:
    """How many whole rows Algorithm 3's line 3 holds: P_i and dP_i (storage dtype), then dS_i (float32) in dP_i's
    place, and D_i."""
    per_row = s * Nk + max(s, F) * Nk + F
    return _whole_rows(N, per_row, Nk, sram_bytes, "standard attention's backward holds whole rows of P, dP and dS")


def _kv_gradients(Bc: int, d: int, s: int) -> dict[str, int]:
    """What a FlashAttention backward keeps for the whole inner loop: K_j, V_j and their gradients' accumulators."""
    return {"K_j": s * Bc * d, "V_j": s * Bc * d, "dK_j": F * Bc * d, "dV_j": F * Bc * d}


def _whole_rows(N: int, per_row: int, Nk: int, sram_bytes: int, holds: str) -> int:
    rows = sram_bytes // per_row
    if rows < 1:
        raise SRAMOverflowError(
            f"SRAM overflow: {holds} in SRAM ({human_bytes(per_row)} for Nk={Nk}) but the SRAM has "
            f"{human_bytes(sram_bytes)}"
        )
    return min(rows, N)


# -- Flash-Decoding --------------------------------------------------------------------


def chunks(Nk: int, splits: int) -> list[tuple[int, int]]:
    """The keys [k0, k1) of each of Flash-Decoding's `splits` chunks: as even as can be, none empty."""
    return [(p * Nk // splits, (p + 1) * Nk // splits) for p in range(splits)]


def decoding_footprint(Nq: int, Bc: int, d: int, s: int, splits: int) -> dict[str, int]:
    """Flash-Decoding's buffers at the peak: kernel 1's (P̃ next to O_p), or the combine's if larger."""
    split = {
        "Q": s * Nq * d,
        "K_j": s * Bc * d,
        "V_j": s * Bc * d,
        "O_p": F * Nq * d,
        "P̃": F * Nq * Bc,
        "ℓ, m, m_new, α": 4 * F * Nq,
    }
    merge = {"lse_parts": F * splits * Nq, "lse_max, LSE": 2 * F * Nq, "O": F * Nq * d, "O_p": F * Nq * d}
    return merge if splits > 1 and sum(merge.values()) > sum(split.values()) else split


def decoding_fit(Nq: int, Nk: int, d: int, s: int, sram_bytes: int, splits: int) -> int:
    """Flash-Decoding's largest power-of-two Bc (capped at the longest chunk) whose buffers fit in `sram_bytes`."""
    longest = max(k1 - k0 for k0, k1 in chunks(Nk, splits))

    def parts(_: int, bc: int) -> dict[str, int]:  # every block holds all Nq query rows
        return decoding_footprint(Nq, bc, d, s, splits)

    what = f"Flash-Decoding in {plural(splits, 'split')}"
    refuse_overflow(decoding_footprint(1, 1, d, s, splits), 1, 1, sram_bytes, what, "even one query row and one key, ")
    if (need := sum(parts(Nq, 1).values())) > sram_bytes:  # the query rows alone are too many: say how many fit
        fit = fewer(Nq, lambda q: sum(decoding_footprint(q, 1, d, s, splits).values()) <= sram_bytes)
        raise InputError(
            f"blocks: {plural(Nq, 'query row')} need {bytes_and_units(need)} of SRAM for {what}, even one key at a "
            f"time, but the SRAM holds {bytes_and_units(sram_bytes)}: at most {plural(fit, 'query row')} fit"
        )
    return largest(parts, Nq, longest, sram_bytes, what, Br=Nq)[1]


def fewer(n: int, fits: Callable[[int], bool]) -> int:
    """An m in 1 … n − 1 with fits(m) and not fits(m + 1), found by halving the gap: 1 must fit, n must not."""
    fit, over = 1, n
    while over - fit > 1:
        mid = (fit + over) // 2
        fit, over = (mid, over) if fits(mid) else (fit, mid)
    return fit


def decoding_blocks(Nq: int, Nk: int, d: int, s: int, sram_bytes: int, splits: int, Bc: int | None = None) -> int:
    """Flash-Decoding's Bc: the one given (refused if its buffers do not fit), or `decoding_fit`'s."""
    if Bc is None:
        return decoding_fit(Nq, Nk, d, s, sram_bytes, splits)
    need = sum(decoding_footprint(Nq, Bc, d, s, splits).values())
    if need > sram_bytes:
        raise InputError(
            f"block_cols: Bc={Bc} needs {need} bytes of SRAM for Flash-Decoding but the SRAM holds {sram_bytes}"
        )
    return Bc


# -- rules -----------------------------------------------------------------------------


def paper(sram_bytes: int, d: int, s: int) -> tuple[int, int]:
    """The paper's rule (Algorithm 1, line 1): Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d), M = SRAM size in elements."""
    M = sram_bytes // s
    Bc = ceil(M / (4 * d))
    return min(Bc, d), Bc


def refuse_overflow(parts: dict[str, int], Br: int, Bc: int, sram_bytes: int, what: str, why: str = "") -> None:
    """Raise InputError listing `parts` (buffer → bytes) if together they exceed `sram_bytes`."""
    total = sum(parts.values())
    if total > sram_bytes:
        listing = ", ".join(f"{name} {human_bytes(b)}" for name, b in parts.items())
        raise InputError(
            f"blocks: {why}Br={Br}, Bc={Bc}, which need {bytes_and_units(total)} of SRAM for {what} ({listing}) but "
            f"the SRAM holds {bytes_and_units(sram_bytes)}"
        )


def refuse_smallest(parts: dict[str, int], sram_bytes: int, what: str) -> None:
    """Raise InputError if even Br = Bc = 1, whose buffers are `parts`, do not fit: once, with the two sizes."""
    if (total := sum(parts.values())) > sram_bytes:
        raise InputError(
            f"blocks: even the smallest blocks are too big: Br = Bc = 1 need {bytes_and_units(total)} of SRAM for "
            f"{what} but the SRAM holds {bytes_and_units(sram_bytes)}"
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

    def refuse(br: int, bc: int) -> None:
        refuse_overflow(parts(br, bc), br, bc, sram_bytes, what)

    if Br is None and Bc is None:
        refuse_smallest(parts(1, 1), sram_bytes, what)
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
