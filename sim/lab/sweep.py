"""Standard attention against FlashAttention as N grows: HBM bytes, FLOPs, intensity, roofline time, memory; and
FlashAttention's time and bound below HBM (`sim.machine`: L2, waves, the SM's units), where the HBM roofline calls
it memory-bound and a GPU's L2 makes it compute-bound.

Counts come from `sim.machine.iomodel`'s closed forms, which the tests hold equal to the simulated
ledgers byte for byte — at N = 64K a simulated standard attention would hold a 4G-entry S.
Standard attention keeps S and P (N × Nk each, in the storage dtype) in HBM for every
(batch, head); `Sweep.oom_n` is the first N in the sweep where they, with Q, K, V and O, no
longer fit the GPU, and `Sweep.largest_n` the largest N that still does.
"""

import csv
import io
from dataclasses import dataclass, replace
from itertools import product
from math import ceil

from sim.algorithms import registry
from sim.algorithms.registry import REGISTRY
from sim.api import closed_form
from sim.core.dtypes import DTYPES, F, itemsize
from sim.core.errors import InputError
from sim.lab import report, training
from sim.machine import hardware as hardware_
from sim.machine import prediction
from sim.machine.hardware import Hardware


@dataclass(frozen=True)
class Side:
    """One algorithm at one configuration, every head."""

    hbm_bytes: int
    flops: int
    seconds: float
    bound: str  # "memory" or "compute": the bound of the kernel that takes longest
    memory_bytes: int  # what it keeps in HBM: standard attention's S and P; both keep Q, K, V, O (and L)
    below: tuple[float, str] | None = None  # sim.machine's time and bound below HBM (FlashAttention's side, `_below`)

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte."""
        return self.flops / self.hbm_bytes


@dataclass(frozen=True)
class Row:
    n: int
    d: int
    block_rows: int  # FlashAttention's forward blocks
    block_cols: int
    backward_blocks: tuple[int, int] | None  # its backward's (Br, Bc), when the sweep has the backward pass
    sram_bytes: int
    standard: Side
    flash: Side
    standard_fits: bool  # S and P (with Q, K, V, O) fit in the GPU's HBM

    def to_dict(self) -> dict:
        """One flat record (for JSON and CSV)."""
        out = {"n": self.n, "d": self.d, "block_rows": self.block_rows, "block_cols": self.block_cols}
        if self.backward_blocks:
            out |= {"backward_block_rows": self.backward_blocks[0], "backward_block_cols": self.backward_blocks[1]}
        out["sram_bytes"] = self.sram_bytes
        for name, side in (("standard", self.standard), ("flash", self.flash)):
            out |= {
                f"{name}_hbm_bytes": side.hbm_bytes, f"{name}_flops": side.flops, f"{name}_intensity": side.intensity,
                f"{name}_seconds": side.seconds, f"{name}_bound": side.bound, f"{name}_memory_bytes": side.memory_bytes,
            }  # fmt: skip
        below = self.flash.below or (None, None)
        out |= {"flash_below_hbm_seconds": below[0], "flash_below_hbm_bound": below[1]}
        return out | {"standard_fits": self.standard_fits, "speedup": self.standard.seconds / self.flash.seconds}


@dataclass(frozen=True)
class Sweep:
    rows: list[Row]
    algorithm: str  # the FlashAttention variant: any algorithm in the registry but standard attention
    batch: int
    heads: int
    dtype: str
    hardware: Hardware
    causal: bool
    backward: bool  # forward + backward, or the forward alone
    oom_n: int | None  # the first N of the sweep at which standard attention's S and P do not fit
    largest_n: int  # the largest N (at the first d) at which they still fit

    def to_dict(self) -> dict:
        config = {
            "algorithm": self.algorithm, "batch": self.batch, "heads": self.heads, "dtype": self.dtype,
            "hardware": self.hardware.name, "hbm_capacity_bytes": self.hardware.hbm_bytes, "causal": self.causal,
            "passes": "forward + backward" if self.backward else "forward",
        }  # fmt: skip
        return {
            "config": config,
            "oom_n": self.oom_n,
            "largest_n": self.largest_n,
            "rows": [r.to_dict() for r in self.rows],
        }

    def to_csv(self) -> str:
        """One line per row, with a header."""
        out = io.StringIO()
        records = [r.to_dict() for r in self.rows]
        writer = csv.DictWriter(out, fieldnames=list(records[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        return out.getvalue()


def flash_variants() -> tuple[str, ...]:
    """The algorithms a sweep sets against standard attention: every one in the registry but it."""
    return tuple(name for name in REGISTRY if name != "standard")


def standard_memory(N: int, d: int, s: int, heads: int) -> int:
    """HBM standard attention holds: S and P (N × N), Q, K, V and O (N × d), for every head."""
    return heads * s * (2 * N * N + 4 * N * d)


def flash_memory(N: int, d: int, s: int, heads: int) -> int:
    """HBM FlashAttention holds: Q, K, V and O (N × d) and L (N float32), for every head."""
    return heads * (s * 4 * N * d + F * N)


def largest_fitting_n(d: int, s: int, heads: int, capacity: int) -> int:
    """The largest N whose standard attention (S, P, Q, K, V, O) fits in `capacity` bytes (0 if none)."""
    lo, hi = 0, 1
    while standard_memory(hi, d, s, heads) <= capacity:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # standard_memory(lo) fits, standard_memory(hi) does not
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if standard_memory(mid, d, s, heads) <= capacity else (lo, mid)
    return lo


MOST_STEPS = 300_000  # block-steps a sweep plays the L2 for, a pass (N = 16,384 forward at 128 × 128, 16 heads)


def sweep(
    ns,
    *,
    ds=(64,),
    blocks=(None,),
    srams=(None,),
    batch: int = 16,
    heads: int = 16,
    dtype: str = "fp16",
    hardware: str | Hardware = hardware_.DEFAULT,
    causal: bool = False,
    algorithm: str = "flash2",
    backward: bool = False,
) -> Sweep:
    """Every combination of N in `ns`, d in `ds`, block in `blocks` (Br = Bc; None: the largest that fit)
    and SRAM size in `srams` (None: the hardware's), with N = Nk.
    """
    hw = hardware if isinstance(hardware, Hardware) else hardware_.get(hardware)
    if dtype not in DTYPES:
        raise InputError(f"dtype: unknown {dtype!r}; choose one of {', '.join(DTYPES)}")
    if algorithm not in flash_variants():
        raise InputError(f"algorithm: {algorithm!r} is not a FlashAttention; choose {' or '.join(flash_variants())}")
    for name, values in (("n", ns), ("d", ds), ("batch", [batch]), ("heads", [heads])):
        _positive(name, values)
    for name, values in (("block", blocks), ("sram_bytes", srams)):
        _positive(name, [x for x in values if x is not None])
    s, total_heads = itemsize(dtype), batch * heads
    rows = []
    for d, block, sram, N in product(ds, blocks, srams, sorted(ns)):
        M = sram or hw.sram_bytes
        try:
            fwd, bwd = pass_blocks(algorithm, N, d, s, M, block, backward)
        except InputError as e:  # say which point of the sweep it was
            raise InputError(f"{e}, at d = {d}, N = {N}") from None
        ks = {  # standard attention's counts do not depend on blocks
            name: training.kernels(
                name, N, N, d, dtype, hw, heads=total_heads, forward_blocks=fwd, backward_blocks=bwd, causal=causal
            )
            for name in ("standard", algorithm)
        }
        sides = {name: _side(k, memory) for name, k, memory in (
            ("standard", ks["standard"], standard_memory(N, d, s, total_heads)),
            ("flash", ks[algorithm], flash_memory(N, d, s, total_heads)),
        )}  # fmt: skip
        shape = dict(n=N, d=d, batch=batch, heads=heads, dtype=dtype, causal=causal, sram_bytes=M, hardware=hw)
        sides["flash"] = replace(sides["flash"], below=_below(algorithm, fwd, bwd, shape))
        fits = sides["standard"].memory_bytes <= hw.hbm_bytes
        rows.append(Row(N, d, *fwd, bwd, M, sides["standard"], sides["flash"], fits))
    oom = next((r.n for r in rows if r.d == ds[0] and not r.standard_fits), None)
    return Sweep(
        rows,
        algorithm,
        batch,
        heads,
        dtype,
        hw,
        causal,
        backward,
        oom,
        largest_fitting_n(ds[0], s, total_heads, hw.hbm_bytes),
    )


def _side(ks: list[training.Kernel], memory: int) -> Side:
    c = training.total(ks)
    longest = max(ks, key=lambda k: k.roofline.seconds)
    return Side(c.hbm_bytes, c.flops, training.seconds(ks), longest.roofline.bound, memory)


def _below(algorithm: str, fwd: tuple[int, int], bwd: tuple[int, int] | None, shape: dict) -> tuple[float, str] | None:
    """sim.machine's time for the pass(es) below HBM (L2, waves, the SM's units), summed, and the bound of the longer
    (`sim.lab.report.below_hbm`): the forward's as `flashsim run --counts-only` predicts it, the backward's as
    `run` would if it predicted one (`run --backward` predicts the forward alone); None where its L2 play would
    take too long."""
    heads = shape["batch"] * shape["heads"]
    if not any(predicted_steps(shape["n"], fwd, bwd, heads, shape["hardware"], algorithm)):
        return None
    passes = [closed_form.forward(algorithm, **shape, block_rows=fwd[0], block_cols=fwd[1])]
    if bwd is not None:
        passes.append(closed_form.backward(algorithm, **shape, block_rows=bwd[0], block_cols=bwd[1]))
    below = [report.below_hbm(p) for p in passes]
    if None in below:
        return None
    return sum(b["seconds"] for b in below), max(below, key=lambda b: b["seconds"])["bound"]


def predicted_steps(
    N: int, fwd: tuple[int, int], bwd: tuple[int, int] | None, heads: int, hw: Hardware, algorithm: str = "flash2"
) -> tuple[int, int]:
    """The block-steps `_below` plays the L2 for (`sim.machine.prediction.predict`), the forward's and the
    backward's (0 without one): each pass's tile pairs for min(heads, EXACT_HEADS) heads, or on hardware whose SMs'
    paces spread (`l2.paced`: the H100's) for as many heads as its MOST_STEPS allows; (0, 0) where a pass would take
    more than MOST_STEPS (a sweep's row stays within a few seconds; `flashsim run` plays up to the model's own
    limit), its grid more thread blocks than the model walks, or a backward the model does not cover (flash1's)."""
    if bwd is not None and algorithm not in prediction.BACKWARD_MODELLED:
        return 0, 0
    steps = []
    for Br, Bc in [b for b in (fwd, bwd) if b is not None]:
        pairs = ceil(N / Br) * ceil(N / Bc)
        exact = prediction.EXACT_HEADS
        played = max(exact, prediction.MOST_STEPS // pairs) if hw.sm_pace_spread else exact
        if heads * ceil(N / Br) > prediction.MOST_BLOCKS:
            return 0, 0
        steps.append(pairs * min(heads, played))
    return (0, 0) if max(steps) > MOST_STEPS else (steps[0], sum(steps[1:]))


def pass_blocks(algorithm, N, d, s, M, block, backward) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """FlashAttention's forward (and backward) blocks: Br = Bc = `block` (checked to fit), or the largest that fit."""
    if block is None:
        fwd = registry.fit(algorithm, N, N, d, s, M)
        return fwd, registry.fit(algorithm, N, N, d, s, M, backward=True) if backward else None
    B = min(block, N)
    registry.check_fits(algorithm, B, B, d, s, M, f"--block {block} gives ")
    if backward:
        registry.check_fits(algorithm, B, B, d, s, M, f"--block {block} gives ", backward=True)
    return (B, B), (B, B) if backward else None


def _positive(name: str, values) -> None:
    for x in values:
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise InputError(f"{name}: must be positive integers, got {x!r}")
