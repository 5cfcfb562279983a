"""What a simulated pass returns: its costs (one base for every pass) and what it computed."""

from dataclasses import dataclass, field

import numpy as np

from sim.machine.hardware import Hardware
from sim.machine.iomodel import Counts
from sim.machine.ledger import Ledger
from sim.machine.occupancy import Occupancy
from sim.machine.trace import Trace


@dataclass(kw_only=True)
class Costs:
    """What a pass cost and how it ran. Byte and work counts cover every head."""

    algorithm: str
    ledger: Ledger
    block_rows: int
    block_cols: int
    sram_bytes: int  # the SRAM capacity the run was held to
    sram_peak_bytes: int
    scale: float
    causal: bool
    dtype: str  # storage dtype: "fp16", "bf16" or "fp32"
    hardware: Hardware
    heads: int  # batch × heads that were counted
    n: int  # query rows
    nk: int  # key rows
    d: int
    dropout_p: float = 0.0
    seed: int | None = None  # the dropout generator's seed: all the backward pass needs to redraw the mask
    trace: Trace | None = None  # record="steps" or "values": the first head's steps
    window: tuple[int, int] | None = None  # (left, right), −1 unbounded; flash2 only
    alibi_slopes: np.ndarray | None = None  # (B, Hq) float32
    softcap: float | None = None
    pack_gqa: bool = False  # GQA's packed schedule: one program per K/V head

    @property
    def skipped_tiles(self) -> int:
        """Tiles (Q block × K/V block) the mask hid entirely, never read nor computed (flash2's listings)."""
        return self.ledger.work["skipped"]

    @property
    def hbm_read_bytes(self) -> int:
        return self.ledger.hbm_read_bytes

    @property
    def hbm_write_bytes(self) -> int:
        return self.ledger.hbm_write_bytes

    @property
    def hbm_bytes(self) -> int:
        return self.ledger.hbm_read_bytes + self.ledger.hbm_write_bytes

    @property
    def flops(self) -> int:
        """Matmul FLOPs, 2·m·n·k per product."""
        return self.ledger.flops

    @property
    def exps(self) -> int:
        return self.ledger.work["exp"]

    @property
    def elementwise(self) -> int:
        return self.ledger.work["elementwise"]

    def predict(self, launch=None):
        """Below HBM: DRAM bytes read and written once L2 serves re-reads, and the time with what bounds it
        (`sim.machine.prediction.Prediction`), for this run's blocks on its hardware; `launch` defaults to
        FlashAttention-2's kernel shape with this run's SRAM peak (`sim.machine.launch.generic`)."""
        from sim.machine import launch as launches
        from sim.machine.prediction import predict

        launch = launch or launches.generic(self.sram_peak_bytes, self.hardware, self.dtype)
        s = {"fp16": 2, "bf16": 2, "fp32": 4}[self.dtype]
        return predict(
            self.algorithm, self.n, self.nk, self.d, s, self.block_rows, self.block_cols, self.causal, self.heads,
            self.hardware, launch, backward=isinstance(self, Gradients),
        )  # fmt: skip


@dataclass(kw_only=True)
class Result(Costs):
    """A forward pass: its output and what it left in HBM for the backward (`sim.backward(result, do)`).

    `count` results hold no arrays (`output` is None) and cannot be differentiated.
    """

    output: np.ndarray | None  # (N, d) or (B, H, N, d), in the storage dtype
    saved: dict[str, np.ndarray] = field(default_factory=dict)  # L (flash2), ℓ and m (flash1), or P (standard)
    q: np.ndarray | None = None  # the inputs as stored
    k: np.ndarray | None = None
    v: np.ndarray | None = None

    @property
    def lse(self) -> np.ndarray | None:
        """flash2's log-sum-exp L (…, N), float32; None for the others."""
        return self.saved.get("L")

    @property
    def stats(self) -> dict[str, np.ndarray]:
        """The per-row statistics other than L left in HBM: flash1's ℓ and m (…, N), float32."""
        return {name: x for name, x in self.saved.items() if name not in ("L", "P")}


@dataclass(kw_only=True)
class Packed(Result):
    """A packed batch of variable lengths (`sim.run_varlen`): output (total_q, Hq, d), lse (total_q, Hq)."""

    cu_seqlens_q: np.ndarray  # (B + 1,) from 0
    cu_seqlens_k: np.ndarray
    padded: Counts  # the closed form of the same batch padded to its longest sequences

    @property
    def padded_hbm_bytes(self) -> int:
        """What the padded batch (B, Hq, max N, d) would move: every padded row and key read and computed."""
        return self.padded.hbm_bytes


@dataclass(kw_only=True)
class Gradients(Costs):
    """A backward pass: dQ, dK, dV (None for `count_backward`), in the storage dtype."""

    dq: np.ndarray | None  # (N, d) or (B, H, N, d)
    dk: np.ndarray | None  # (Nk, d) or (B, H, Nk, d)
    dv: np.ndarray | None


@dataclass(kw_only=True)
class Decoded(Costs):
    """A Flash-Decoding run: the output, its log-sum-exp, and the SM model for its number of splits."""

    output: np.ndarray  # (Nq, d) or (B, H, Nq, d), in the storage dtype
    lse: np.ndarray  # (…, Nq) float32
    splits: int
    occupancy: Occupancy  # the SM model for this batch × heads and this many splits
    page_size: int | None = None  # a paged cache's keys per page (`sim.api.paged`)
    cache_seqlens: np.ndarray | None = None  # (B,) each sequence's keys in a paged cache
