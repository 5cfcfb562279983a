"""Beyond one GPU: P devices, each its own Chip (HBM, SRAM, ledger), and the links that carry tensors between them.

A `Link` is what one device can send (and, at the same time, receive) per second, plus a fixed cost per
message. Devices exchange tensors only through `Devices.exchange`, which books every byte on the
sender's link: the counterpart, one level up, of `Chip.load` booking every byte from HBM.
"""

from dataclasses import dataclass

import numpy as np

from sim.core.errors import InputError
from sim.machine.memory import Chip
from sim.machine.trace import Trace

GB = 10**9
US = 1e-6


@dataclass(frozen=True)
class Link:
    """A device's connection to the others: `bandwidth` bytes/s each way, `latency` seconds per message."""

    name: str
    bandwidth: float
    latency: float
    source: str

    def seconds(self, nbytes: int) -> float:
        """Time to send `nbytes` as one message (0 for nothing sent)."""
        return 0.0 if nbytes == 0 else self.latency + nbytes / self.bandwidth


LATENCY_NOTE = "latency: an assumed per-message cost (launch, handshake, first byte), to be calibrated on a machine"
LINKS = {
    link.name: link
    for link in (
        Link(
            "NVLink4",
            450 * GB,
            3 * US,
            "NVIDIA H100 SXM datasheet: NVLink 900 GB/s per GPU, both directions together (18 NVLink 4 links); "
            "through NVSwitch any GPU pair gets 450 GB/s each way. " + LATENCY_NOTE,
        ),
        Link(
            "PCIe5",
            63 * GB,
            5 * US,
            "PCI Express 5.0 x16: 32 GT/s × 16 lanes, 128b/130b encoding = 63 GB/s each way. " + LATENCY_NOTE,
        ),
        Link(
            "IB-NDR",
            50 * GB,
            8 * US,
            "InfiniBand NDR: 400 Gb/s = 50 GB/s each way per port, one ConnectX-7 port per GPU as in a DGX H100 "
            "(between nodes). " + LATENCY_NOTE,
        ),
    )
}
DEFAULT_LINK = "NVLink4"


def link(name) -> Link:
    """The preset called `name` (case-insensitive), or a `Link` as it is."""
    if isinstance(name, Link):
        return name
    for key, preset in LINKS.items():
        if key.lower() == str(name).lower():
            return preset
    raise InputError(f"link: unknown preset {name!r}; choose one of {', '.join(LINKS)}")


class Devices:
    """P devices in a ring (device p sends to p + 1 mod P): `chips[p]`, and `sent[p]` bytes device p sent.

    With `trace`, device `traced` records its steps (what `flashsim ring --trace` shows).
    """

    def __init__(self, P: int, sram_bytes: int, trace: Trace | None = None, traced: int = 0):
        self.P = P
        self.chips = [
            Chip(sram_bytes, "steps", trace) if trace is not None and p == traced else Chip(sram_bytes)
            for p in range(P)
        ]
        self.sent = [0] * P

    def exchange(self, moves: list[tuple[int, int, dict[str, np.ndarray]]]) -> None:
        """Every (src, dst, {name: array}) at once: each array, read from src's HBM, lands in dst's HBM under
        its name (after all are gathered, so a device may send a shard and receive its replacement)."""
        landed = []
        for src, dst, tensors in moves:
            for name, array in tensors.items():
                landed.append((dst, name, array.copy()))
                if src != dst:
                    self.sent[src] += array.nbytes
        for dst, name, array in landed:
            self.chips[dst].hbm.place(name, array)

    def ring(self, names: tuple[str, ...]) -> None:
        """Pass the tensors called `names` one device along the ring: p's go to p + 1, p − 1's arrive."""
        self.exchange([(p, (p + 1) % self.P, {n: self.chips[p].hbm.tensors[n] for n in names}) for p in range(self.P)])
