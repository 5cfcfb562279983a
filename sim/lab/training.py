"""Attention in a training step: forward plus backward, their traffic and work side by side, and their time.

The time of a pass is the sum over its kernels of the roofline max(FLOPs / peak, bytes /
bandwidth); standard attention runs three kernels forward and five backward, FlashAttention
one each (FlashAttention-2's backward adds the pre-pass that computes D).
"""

from dataclasses import dataclass

from sim.algorithms import registry
from sim.api.results import Gradients, Result
from sim.core.dtypes import itemsize
from sim.machine import iomodel
from sim.machine.hardware import Hardware


@dataclass(frozen=True)
class Kernel:
    """One kernel of a pass for every head: its counts and its roofline time."""

    direction: str  # "forward" or "backward"
    name: str
    counts: iomodel.Counts
    roofline: iomodel.Roofline


def kernels(
    algorithm: str,
    N: int,
    Nk: int,
    d: int,
    dtype: str,
    hw: Hardware,
    *,
    heads: int,
    forward_blocks: tuple[int, int],
    backward_blocks: tuple[int, int] | None = None,
    causal: bool = False,
    dropout: bool = False,
) -> list[Kernel]:
    """The forward pass's kernels, then (given its blocks) the backward's, for `heads` heads."""
    s = itemsize(dtype)
    parts = [
        ("forward", name, c) for name, c in registry.kernels(algorithm, N, Nk, d, s, *forward_blocks, causal, dropout)
    ]
    if backward_blocks is not None:
        back = registry.backward_kernels(algorithm, N, Nk, d, s, *backward_blocks, causal, dropout)
        parts += [("backward", name, c) for name, c in back]
    return [Kernel(p, name, c.times(heads), iomodel.roofline(c.times(heads), hw, dtype)) for p, name, c in parts]


def seconds(ks: list[Kernel], direction: str | None = None) -> float:
    """Estimated time of the kernels (of one direction, or all), run one after another."""
    return sum(k.roofline.seconds for k in ks if direction in (None, k.direction))


def total(ks: list[Kernel], direction: str | None = None) -> iomodel.Counts:
    """The kernels' counts added up (of one direction, or all)."""
    return iomodel.sum_counts(k.counts for k in ks if direction in (None, k.direction))


def backward_report(grads: Gradients, max_abs_err: dict | None = None) -> dict:
    """The JSON-ready summary of a backward pass (counts cover every head), checked against the closed form."""
    s = itemsize(grads.dtype)
    closed = registry.backward_counts(
        grads.algorithm, grads.n, grads.nk, grads.d, s, grads.block_rows, grads.block_cols, grads.causal,
        grads.dropout_p > 0,
    ).times(grads.heads)  # fmt: skip
    measured = (grads.hbm_read_bytes, grads.hbm_write_bytes, grads.flops, grads.exps, grads.ledger.work["elementwise"])
    return {
        "block_rows": grads.block_rows,
        "block_cols": grads.block_cols,
        "sram_peak_bytes": grads.sram_peak_bytes,
        "hbm_read_bytes": grads.hbm_read_bytes,
        "hbm_write_bytes": grads.hbm_write_bytes,
        "hbm_bytes": grads.hbm_bytes,
        "flops": grads.flops,
        "exps": grads.exps,
        "elementwise": grads.ledger.work["elementwise"],
        "per_tensor": grads.ledger.per_tensor("hbm"),
        "closed_form": {
            "hbm_read_bytes": closed.hbm_read_bytes,
            "hbm_write_bytes": closed.hbm_write_bytes,
            "flops": closed.flops,
            "exps": closed.exps,
            "elementwise": closed.elementwise,
            "matches": measured
            == (closed.hbm_read_bytes, closed.hbm_write_bytes, closed.flops, closed.exps, closed.elementwise),
        },
        "max_abs_err": max_abs_err,
    }


def split(forward: Result, backward: Gradients) -> dict:
    """FLOPs, HBM bytes, exponentials and elementwise work: forward, backward and their total."""
    out = {}
    for key, f, b in (
        ("flops", forward.flops, backward.flops),
        ("hbm_bytes", forward.hbm_bytes, backward.hbm_bytes),
        ("exps", forward.exps, backward.exps),
        ("elementwise", forward.ledger.work["elementwise"], backward.ledger.work["elementwise"]),
    ):
        out[key] = {"forward": f, "backward": b, "total": f + b}
    return out
