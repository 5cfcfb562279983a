"""The registry: every attention algorithm flashsim runs, by name — what the CLI, bench, sweep, trace, lessons and
grader read.

One paper listing per file, named after it. A forward listing is `forward(chip, *, Br, Bc, scale, causal,
dropout)`: it finds Q, K, V in `chip.hbm` and leaves O there, with what its `saves` names for the
backward; a backward listing finds Q, K, V, O, dO and those and leaves dQ, dK, dV. A closed form is
`kernels(N, Nk, d, s, Br, Bc, causal, dropout) -> [(kernel name, Counts)]`, a footprint
`footprint(Br, Bc, d, s) -> {buffer: bytes}` at the listing's SRAM peak for full blocks. The built-in
algorithms' closed forms live in `sim.iomodel` and their footprints in `sim.blocks`; a new algorithm may
bring its own in its file. Adding one is that file and one entry in `REGISTRY`.

Flash-Decoding sits beside the registry: it takes a number of splits rather than row blocks and has no
backward, so it has its own entry point (`sim.decode`), listing (`flash_decoding.py`), closed form
(`sim.iomodel.decoding`), footprint and block search (`sim.blocks.decoding_footprint`, `decoding_fit`).
"""

from collections.abc import Callable
from dataclasses import dataclass

from sim import blocks, iomodel
from sim.algorithms import (
    flash1,
    flash1_backward,
    flash2,
    flash2_backward,
    standard,
    standard_backward,
)
from sim.errors import InputError


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
    grows: str | None  # the block `sim.blocks.fit` grows past the largest square: "rows" (Br), "cols" (Bc) or None
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
