"""The registry: every attention algorithm flashsim runs, by name — what the CLI, bench, sweep, trace, lessons and
grader read.

One paper listing per file, named after it. A forward listing is `forward(chip, *, Br, Bc, scale, causal,
dropout)`: it finds Q, K, V in `chip.hbm` and leaves O there, with what its `saves` names for the
backward; a backward listing finds Q, K, V, O, dO and those and leaves dQ, dK, dV. A closed form is
`kernels(N, Nk, d, s, Br, Bc, causal, dropout) -> [(kernel name, Counts)]`, a footprint
`footprint(Br, Bc, d, s) -> {buffer: bytes}` at the listing's SRAM peak for full blocks. The built-in
algorithms' closed forms live in `sim.machine.iomodel` and their footprints in `sim.machine.blocks`; a new algorithm may
bring its own in its file. Adding one is that file and one entry in `REGISTRY`.

Flash-Decoding sits beside the registry: it takes a number of splits rather than row blocks and has no
backward, so it has its own entry point (`sim.decode`), listing (`flash_decoding.py`), closed form
(`sim.machine.iomodel.decoding`), footprint and block search (`sim.machine.blocks.decoding_footprint`, `decoding_fit`).
"""

from collections.abc import Callable
from dataclasses import dataclass

from sim.algorithms import (
    flash1,
    flash1_backward,
    flash2,
    flash2_backward,
    standard,
    standard_backward,
)
from sim.core.errors import InputError
from sim.machine import blocks, iomodel


@dataclass(frozen=True)
class Algorithm:
    """One attention algorithm: its listings, closed forms and SRAM footprints, and how the paper names it."""

    name: str  # what the API and the CLI call it
    title: str  # how a table heads it
    paper: str  # where its listing comes from
    description: str  # one line
    forward: Callable[..., None]  # the forward listing
    kernels: Callable[..., iomodel.Kernels]  # its closed form, kernel by kernel
    footprint: Callable[[int, int, int, int], dict[str, int]]
    grows: (
        str | None
    )  # the block `sim.algorithms.registry.fit` grows past the largest square: "rows" (Br), "cols" (Bc) or None
    saves: tuple[str, ...]  # what the forward leaves in HBM for the backward
    dropout: bool  # whether its listings drop probabilities (FlashAttention's Algorithm 2)
    backward: Callable[..., None] | None = None  # the backward listing, if it has one
    backward_paper: str | None = None
    backward_kernels: Callable[..., iomodel.Kernels] | None = None
    backward_footprint: Callable[[int, int, int, int], dict[str, int]] | None = None
    backward_grows: str | None = None


STANDARD = Algorithm(
    name="standard",
    title="standard attention",
    paper="Dao et al. 2022, FlashAttention, Algorithm 0",
    description="S = τQKᵀ and P = softmax(S) written to HBM, then O = PV: three kernels",
    forward=standard.forward,
    kernels=iomodel.standard_kernels,
    footprint=blocks.standard_footprint,
    grows=None,
    saves=("P",),
    dropout=False,
    backward=standard_backward.backward,
    backward_paper="Dao et al. 2022, FlashAttention, Algorithm 3",
    backward_kernels=iomodel.standard_backward_kernels,
    backward_footprint=blocks.standard_backward_footprint,
)
FLASH1 = Algorithm(
    name="flash1",
    title="FlashAttention",
    paper="Dao et al. 2022, FlashAttention, Algorithm 1 (with dropout: Algorithm 2)",
    description="outer loop over K/V blocks; O_i, ℓ_i, m_i make a round trip to HBM for every K/V block",
    forward=flash1.forward,
    kernels=iomodel.flash1_kernels,
    footprint=blocks.flash1_footprint,
    grows="cols",
    saves=("ℓ", "m"),
    dropout=True,
    backward=flash1_backward.backward,
    backward_paper="Dao et al. 2022, FlashAttention, Algorithm 4",
    backward_kernels=iomodel.flash1_backward_kernels,
    backward_footprint=blocks.flash1_backward_footprint,
    backward_grows="cols",
)
FLASH2 = Algorithm(
    name="flash2",
    title="FlashAttention-2",
    paper="Dao 2023, FlashAttention-2, Algorithm 1",
    description="outer loop over Q blocks; O_i rescaled once at the end and written once, with the log-sum-exp L",
    forward=flash2.forward,
    kernels=iomodel.flash2_kernels,
    footprint=blocks.flash2_footprint,
    grows="rows",
    saves=("L",),
    dropout=True,
    backward=flash2_backward.backward,
    backward_paper="Dao 2023, FlashAttention-2, Algorithm 2",
    backward_kernels=iomodel.flash2_backward_kernels,
    backward_footprint=blocks.flash2_backward_footprint,
    backward_grows="cols",
)

REGISTRY: dict[str, Algorithm] = {a.name: a for a in (STANDARD, FLASH1, FLASH2)}


def get(name: str) -> Algorithm:
    """The registry's entry for `name`; an InputError naming the algorithms there are otherwise."""
    if name not in REGISTRY:
        raise InputError(f"algorithm: unknown {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


# -- by the algorithm's name: its SRAM footprint, block choice and closed form --------------------


def footprint(
    algorithm: str, Br: int, Bc: int, d: int, s: int, *, backward: bool = False, softcap: bool = False
) -> dict[str, int]:
    """Bytes of each SRAM buffer at the peak of `algorithm`'s forward (or backward) listing, for itemsize `s`
    (a softcap's backward keeps T_ij too: only flash2 takes one)."""
    if softcap and backward:
        return blocks.softcap_backward_footprint(Br, Bc, d, s)
    entry = get(algorithm)
    return (entry.backward_footprint if backward else entry.footprint)(Br, Bc, d, s)


def need(algorithm: str, Br: int, Bc: int, d: int, s: int, *, backward: bool = False, softcap: bool = False) -> int:
    """Total SRAM bytes the listing needs with these blocks."""
    return sum(footprint(algorithm, Br, Bc, d, s, backward=backward, softcap=softcap).values())


def check_fits(
    algorithm: str, Br: int, Bc: int, d: int, s: int, sram_bytes: int, why: str = "", *, backward: bool = False,
    softcap: bool = False,
) -> None:  # fmt: skip
    """Raise InputError naming every buffer if Br × Bc blocks do not fit in `sram_bytes`."""
    parts = footprint(algorithm, Br, Bc, d, s, backward=backward, softcap=softcap)
    blocks.refuse_overflow(parts, Br, Bc, sram_bytes, _what(algorithm, backward), why)


def fit(
    algorithm: str, N: int, Nk: int, d: int, s: int, sram_bytes: int, Br: int | None = None, Bc: int | None = None,
    *, backward: bool = False, softcap: bool = False,
) -> tuple[int, int]:  # fmt: skip
    """The largest blocks that fit (`sim.machine.blocks.largest`), growing the block the registry names: for the forward,
    Br for flash2 (its Tr sets how often K and V are read) and Bc for flash1 (its Tc sets how often Q,
    O, ℓ and m make the round trip); for the backward, Bc, the outer loop's block, whose Tc sets how
    often Q, dO and dQ are re-read. The backward refuses given blocks that do not fit before it runs.
    """
    entry = get(algorithm)
    grow = entry.backward_grows if backward else entry.grows

    def parts(br: int, bc: int) -> dict[str, int]:
        return footprint(algorithm, br, bc, d, s, backward=backward, softcap=softcap)

    return blocks.largest(parts, N, Nk, sram_bytes, _what(algorithm, backward), grow, Br, Bc, check_given=backward)


def choose(
    algorithm: str, rule: str, N: int, Nk: int, d: int, s: int, sram_bytes: int, Br: int | None = None,
    Bc: int | None = None, *, backward: bool = False, softcap: bool = False,
) -> tuple[int, int]:  # fmt: skip
    """The blocks a run uses: the ones given (no larger than N and Nk: a block of more rows than there are is
    all of them), and for the rest `rule`: "fit" (`fit`) or, when none is given, "paper" (`sim.machine.blocks.paper`, refused
    with the buffer sizes if those blocks do not fit)."""
    Br, Bc = (None if B is None else min(B, rows) for B, rows in ((Br, N), (Bc, Nk)))
    if rule == "paper" and Br is None and Bc is None:
        Br, Bc = blocks.paper(sram_bytes, d, s)
        Br, Bc = min(Br, N), min(Bc, Nk)
        check_fits(algorithm, Br, Bc, d, s, sram_bytes, blocks.PAPER_RULE, backward=backward, softcap=softcap)
        return Br, Bc
    return fit(algorithm, N, Nk, d, s, sram_bytes, Br, Bc, backward=backward, softcap=softcap)


def _what(algorithm: str, backward: bool) -> str:
    return f"the {algorithm} backward" if backward else algorithm


def counts(
    algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False, dropout: bool = False
) -> iomodel.Counts:
    """The closed form of `algorithm`'s forward pass for one head (any algorithm in the registry)."""
    return iomodel.sum_counts(c for _, c in kernels(algorithm, N, Nk, d, s, Br, Bc, causal, dropout))


def kernels(
    algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False, dropout: bool = False
) -> iomodel.Kernels:
    """The kernels of `algorithm`'s forward pass for one head (standard attention has three)."""
    return get(algorithm).kernels(N, Nk, d, s, Br, Bc, causal, dropout)


def backward_kernels(
    algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False, dropout: bool = False
) -> iomodel.Kernels:
    """The kernels of `algorithm`'s backward pass for one head, each with its closed-form counts."""
    return get(algorithm).backward_kernels(N, Nk, d, s, Br, Bc, causal, dropout)


def backward_counts(
    algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool = False, dropout: bool = False
) -> iomodel.Counts:
    """The closed form of `algorithm`'s backward pass for one head."""
    return iomodel.sum_counts(c for _, c in backward_kernels(algorithm, N, Nk, d, s, Br, Bc, causal, dropout))
