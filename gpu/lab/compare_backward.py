"""`flashsim compare --backward`: the simulator's FlashAttention-2 backward, with a backward kernel's own tiling,
beside that kernel on the same inputs: errors, bytes per kernel predicted and measured, time.

The simulator's listing (the FlashAttention-2 paper's Algorithm 2) keeps dQ in HBM in the storage dtype and
read-modify-writes dQ_i for every tile pair; the GPU kernel adds τ dS_ij K_j into a float32 copy with atomics
(reductions at L2, never read back by the SM), and a third kernel rounds it once. The comparison shows both.
"""

from dataclasses import dataclass

import numpy as np

import sim
from gpu import device, dtypes
from gpu.backward import flash_attention_backward, resolve
from gpu.backward import fused as backward_fused
from gpu.flash import flash_attention
from gpu.lab import results, timing
from gpu.lab.checks import max_error, random_like
from gpu.lab.compare import (
    measure_counters,
    predicted_dram,
    predicted_time,
    preset_for,
    random_host,
    sim_dtype,
    to_device,
)
from gpu.lab.harness import BACKWARD_FLOPS, flops
from gpu.lab.predict import rung_prediction
from gpu.reference import attention_backward_ref
from gpu.standard import standard_attention, standard_attention_backward
from sim.algorithms import registry as listings
from sim.core.dtypes import F
from sim.machine import iomodel
from sim.machine.prediction import Prediction

GRADS = ("dq", "dk", "dv")
SIM_SRAM = 1 << 30  # the simulator's SRAM need only hold the kernel's blocks: its size changes no count


@dataclass
class BackwardComparison:
    """What `compare --backward` found. Bytes cover every head; errors are max |g − float64| per gradient."""

    config: dict
    errors: dict[str, dict[str, float]]  # {"gpu": …, "standard": … (all heads), "sim": … (head 0)} per gradient
    predicted: list[tuple[str, iomodel.Counts]]  # the simulator's kernels (the closed form its ledger equals)
    measured: dict | None  # ncu counters per launched kernel: pre-pass, main, dQ rounding
    note: str
    measured_ms: float  # the whole backward call, CUDA events
    roofline: iomodel.Roofline | None
    hardware: str | None
    flops: float
    prediction: Prediction | None = None  # the machine model (the kernel's float32 dQ, padded rows): DRAM, time

    @property
    def predicted_dq_bytes(self) -> int:
        """What the simulator's main kernel reads of dQ (s·r·d per tile pair; it writes as much back)."""
        main = self.predicted[1][1]
        kv_out = 2 * self.config["nk"] * self.config["d"] * self.config["itemsize"] * self.config["heads_total"]
        return main.hbm_write_bytes - kv_out

    @property
    def expected_reduction_bytes(self) -> int:
        """What the GPU's atomics add instead: F·r·d per tile pair, float32."""
        return self.predicted_dq_bytes * F // self.config["itemsize"]


def compare_backward(*, n, nk, d, batch, heads, dtype, causal, kernel=None, seed=0, profile=True) -> BackwardComparison:
    """Run the simulator's flash2 backward (head 0, numerics; every head, bytes) and a backward kernel on one input."""
    device.require()
    spec = resolve(kernel, d)  # as the public call picks it on this GPU (rung 7 at d = 64 and 128 on an H100)
    name = dtypes.ALIASES[dtype]
    tiles = spec.default_tiles(d)
    s = np.dtype(dtypes.BY_NAME[name]).itemsize
    q, k, v = random_host(batch, heads, n, nk, d, name, seed)
    qg, kg, vg = (to_device(x) for x in (q, k, v))
    do = random_like(qg, seed + 1)
    o, lse = flash_attention(qg, kg, vg, causal=causal, return_lse=True)
    grads = flash_attention_backward(qg, kg, vg, o, lse, do, causal=causal, kernel=spec.rung)
    refs = attention_backward_ref(qg, kg, vg, do, causal=causal)
    _, probs = standard_attention(qg, kg, vg, causal=causal, return_probs=True)
    standard = standard_attention_backward(qg, kg, vg, probs, do)
    del probs
    head0 = sim.backward(
        "flash2", q[0, 0], k[0, 0], v[0, 0], o[0, 0].get(), lse[0, 0].get(), do[0, 0].get(), causal=causal,
        block_rows=tiles.block_rows, block_cols=tiles.block_cols, sram_bytes=SIM_SRAM,
    )  # fmt: skip
    errors = {
        "gpu": {g: max_error(x, r) for g, x, r in zip(GRADS, grads, refs, strict=True)},
        "standard": {g: max_error(x, r) for g, x, r in zip(GRADS, standard, refs, strict=True)},
        "sim": {
            g: float(np.abs(x.astype(np.float64) - r[0, 0].get()).max())
            for g, x, r in zip(GRADS, (head0.dq, head0.dk, head0.dv), refs, strict=True)
        },
    }
    measured_ms = timing.median_ms(
        lambda: flash_attention_backward(qg, kg, vg, o, lse, do, causal=causal, kernel=spec.rung)
    )
    per_head = listings.backward_kernels("flash2", n, nk, d, s, tiles.block_rows, tiles.block_cols, causal)
    predicted = [(label, c.times(batch * heads)) for label, c in per_head]
    total = iomodel.sum_counts(c for _, c in predicted)
    hw = preset_for(device.properties()["name"])
    roof = iomodel.roofline(total, hw, sim_dtype(name)) if hw is not None else None
    shape = {"n": n, "nk": nk, "d": d, "batch": batch, "heads": heads, "dtype": name, "causal": causal}
    measured, note = (
        measure_counters("backward", spec, shape) if profile else (None, "counters not asked for (--no-counters)")
    )
    config = {
        **shape,
        "kernel": spec.rung,
        "block_rows": tiles.block_rows,
        "block_cols": tiles.block_cols,
        "smem_bytes": spec.smem(d, tiles),
        "itemsize": s,
        "heads_total": batch * heads,
        "launches": 2 if backward_fused(spec, tiles, batch * heads) else 3,
        "device": device.properties()["name"],
    }
    model = rung_prediction(spec, hw, n=n, nk=nk, d=d, batch=batch, heads=heads, s=s, causal=causal) if hw else None
    return BackwardComparison(
        config, errors, predicted, measured, note, measured_ms, roof, hw.name if hw else None,
        BACKWARD_FLOPS * flops(n, nk, d, batch, heads, causal), model,
    )  # fmt: skip


def report(c: BackwardComparison, command: str | None = None) -> dict:
    """The comparison as a recorded result (gpu/lab/results.py), kind "compare-backward"."""
    return {
        "kind": "compare-backward",
        "env": results.environment(command),
        "config": c.config,
        "errors": c.errors,
        "bytes": {
            "predicted": {label: {"read": k.hbm_read_bytes, "write": k.hbm_write_bytes} for label, k in c.predicted}
            | predicted_dram(c.prediction),
            "measured": c.measured and {**c.measured, **measured_totals(c.measured)},
            "note": c.note,
            "predicted_dq_bytes": c.predicted_dq_bytes,
            "expected_reduction_bytes": c.expected_reduction_bytes,
        },
        "time": {
            "measured_ms": c.measured_ms,
            "roofline_ms": c.roofline.seconds * 1e3 if c.roofline else None,
            "flops": c.flops,
            **predicted_time(c.prediction),
        },
    }


def measured_totals(measured: dict) -> dict:
    """The three kernels' L2 → SM and DRAM read bytes, summed: the keys the forward's compare has."""
    return {key: sum(k[key] for k in measured.values()) for key in ("l2_read_bytes", "dram_read_bytes")}
