"""What `sim.ring` returns: the output (and gradients), and per pass each device's ledger, link bytes and steps."""

from dataclasses import dataclass

import numpy as np

from sim.machine.devices import Link
from sim.machine.hardware import Hardware
from sim.machine.iomodel import Counts
from sim.machine.ledger import Ledger
from sim.machine.ring_model import Step
from sim.machine.trace import Trace


@dataclass(kw_only=True)
class Pass:
    """One pass across the devices: the closed forms of device p's HBM traffic and work and of the bytes it sends,
    every head together; the pass as steps of the time model; and, where it was simulated, what device p's ledger
    counted and what it sent (None for a count from the closed forms alone)."""

    closed_form: list[Counts]
    closed_link: list[int]
    steps: list[Step]
    ledgers: list[Ledger] | None = None
    sent: list[int] | None = None
    sram_peak_bytes: int | None = None

    @property
    def overlapped_seconds(self) -> float:
        """The pass with every exchange beside the attention it overlaps: Σ max(compute, transfer)."""
        return sum(s.overlapped for s in self.steps)

    @property
    def serial_seconds(self) -> float:
        """The pass with no overlap: Σ (compute + transfer)."""
        return sum(s.serial for s in self.steps)

    def to_dict(self) -> dict:
        """JSON-ready: per device, what was counted beside the closed form; per step, compute and transfer seconds."""
        devices = []
        for p, (c, link) in enumerate(zip(self.closed_form, self.closed_link, strict=True)):
            closed = {"hbm_read_bytes": c.hbm_read_bytes, "hbm_write_bytes": c.hbm_write_bytes, "flops": c.flops,
                      "link_bytes_sent": link}  # fmt: skip
            row = {"device": p, "closed_form": closed}
            if self.ledgers is not None:
                led = self.ledgers[p]
                row |= {"hbm_read_bytes": led.hbm_read_bytes, "hbm_write_bytes": led.hbm_write_bytes,
                        "flops": led.flops, "link_bytes_sent": self.sent[p]}  # fmt: skip
                row["matches"] = all(row[key] == closed[key] for key in closed)
            devices.append(row)
        steps = [
            {"step": s.label, "compute_s": s.compute, "transfer_s": s.transfer, "overlapped_s": s.overlapped,
             "bound": s.bound}
            for s in self.steps
        ]  # fmt: skip
        return {"source": "closed form" if self.ledgers is None else "simulated", "devices": devices,
                "sram_peak_bytes": self.sram_peak_bytes, "steps": steps, "overlapped_s": self.overlapped_seconds,
                "serial_s": self.serial_seconds}  # fmt: skip


@dataclass(kw_only=True)
class Sharded:
    """Attention across `devices` simulated devices (`scheme` "ring" or "ulysses")."""

    scheme: str
    devices: int
    sharding: str
    causal: bool
    scale: float
    dtype: str
    n: int
    d: int
    batch: int
    heads: int  # H, of each sequence: batch × H heads in all
    hardware: Hardware
    link: Link
    block_rows: int
    block_cols: int
    backward_blocks: tuple[int, int]  # (Br, Bc) of the backward (the forward's where none ran)
    hbm_per_device: int  # the most HBM a device holds in the forward (`sim.machine.ring_model`'s footprints)
    output: np.ndarray | None  # like q, storage dtype (None: counted from the closed forms)
    lse: np.ndarray | None  # (…, N) float32
    forward: Pass
    dq: np.ndarray | None = None
    dk: np.ndarray | None = None
    dv: np.ndarray | None = None
    backward: Pass | None = None
    trace: Trace | None = None  # record="steps": one device's forward, step by step

    def to_dict(self) -> dict:
        """JSON-ready summary (no arrays)."""
        out = {
            "scheme": self.scheme, "devices": self.devices, "sharding": self.sharding, "causal": self.causal,
            "dtype": self.dtype, "n": self.n, "d": self.d, "batch": self.batch,
            "heads": self.heads, "hardware": self.hardware.name,
            "link": {"name": self.link.name, "bandwidth_bytes_per_s": self.link.bandwidth,
                     "latency_s": self.link.latency},
            "block_rows": self.block_rows, "block_cols": self.block_cols, "hbm_per_device": self.hbm_per_device,
            "hbm_capacity": self.hardware.hbm_bytes, "forward": self.forward.to_dict(),
        }  # fmt: skip
        if self.backward is not None:
            out["backward"] = self.backward.to_dict()
        return out
