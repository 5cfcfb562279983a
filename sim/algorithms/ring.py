"""Ring attention (Liu, Zaharia and Abbeel, 2023): Q stays, K/V shards go round a ring of P devices.

Device p keeps its Q shard and, at ring step t = 0 … P − 1, holds the K/V shard s = p − t (mod P): it runs
FlashAttention-2 (`sim.algorithms.flash2`) of its queries against those keys, a piece at a time
(`sim.machine.sharding.pieces`), and folds the partial output O_t and its log-sum-exp L_t into a running
(O_run, L_run) with the merge ⊕ of `sim.algorithms.softmax` — Flash-Decoding's combine, two partials at a time. Meanwhile
it passes the shard on to p + 1. Backward: each device keeps Q, O, dO, L and its dQ; K/V travel with their
float32 gradients dK, dV, which every device adds to, and which arrive home after P hops.
"""

from math import ceil

import numpy as np

from sim.algorithms import flash2, flash2_backward
from sim.algorithms.softmax import SoftmaxState, normalize
from sim.core.dtypes import ACCUMULATOR
from sim.machine.devices import Devices
from sim.machine.memory import Chip
from sim.machine.sharding import Piece, pieces


def forward(devices: Devices, shards, *, Br: int, Bc: int, Bm: int, scale: float, causal: bool) -> None:
    """Each device: Q_p, K_p, V_p in HBM → O_p (storage dtype) and L_run (float32); K/V shards travel as K_in, V_in."""
    P = devices.P
    for chip in devices.chips:
        n, d = chip.hbm.tensors["Q_p"].shape
        chip.hbm.place("K_in", chip.hbm.tensors["K_p"])  # step 0: its own shard, already in HBM
        chip.hbm.place("V_in", chip.hbm.tensors["V_p"])
        chip.hbm.alloc("O_run", (n, d), ACCUMULATOR)
        chip.hbm.alloc("L_run", (n,), ACCUMULATOR)
        _rows(chip, n, Bm, "init", "Initialize O_run = 0, L_run = −∞ in HBM (float32)", _init_run)
    for t in range(P):
        for p, chip in enumerate(devices.chips):
            s = (p - t) % P
            for piece in pieces(shards[p], shards[s], causal):
                mark = _mark(chip)
                _attend(chip, piece, Br=Br, Bc=Bc, scale=scale)
                _rows(chip, piece.rows, Bm, "merge", "O_run, L_run ← (O_run, L_run) ⊕ (O_t, L_t)", _merge, piece.q[0])
                _label(chip, mark, t, s)
        if t < P - 1:  # the next shard arrives while this one is worked on (the time model overlaps the two)
            _pass_on(devices, ("K_in", "V_in"), t)
    for chip in devices.chips:
        n, d = chip.hbm.tensors["Q_p"].shape
        chip.hbm.alloc("O_p", (n, d), chip.hbm.tensors["Q_p"].dtype)
        _rows(chip, n, Bm, "final", "O_p = O_run in the storage dtype", _cast, "O_run", "O_p")


def backward(devices: Devices, shards, *, Br: int, Bc: int, Bm: int, scale: float, causal: bool) -> None:
    """Each device: Q_p, K_p, V_p, O_p, dO_p, L_p in HBM → dQ_p, dK_p, dV_p (storage dtype); dK, dV ride with K/V."""
    P = devices.P
    for chip in devices.chips:
        n, d = chip.hbm.tensors["Q_p"].shape
        for name, src in (("K_in", "K_p"), ("V_in", "V_p")):
            chip.hbm.place(name, chip.hbm.tensors[src])
        for name in ("dQ_run", "dK_in", "dV_in"):
            chip.hbm.alloc(name, (n, d), ACCUMULATOR)
            _rows(chip, n, Bm, "init", f"Initialize {name} = 0 in HBM (float32)", _zero, name)
    for t in range(P):
        for p, chip in enumerate(devices.chips):
            s = (p - t) % P
            for piece in pieces(shards[p], shards[s], causal):
                mark = _mark(chip)
                _differentiate(chip, piece, Br=Br, Bc=Bc, scale=scale)
                _rows(chip, piece.rows, Bm, "add", "dQ_run ← dQ_run + dQ_t", _add, "dQ", "dQ_run", piece.q[0])
                for g in ("dK", "dV"):
                    _rows(chip, piece.keys, Bm, "add", f"{g}_in ← {g}_in + {g}_t", _add, g, f"{g}_in", piece.kv[0])
                _label(chip, mark, t, s)
        if P > 1:  # K/V move on to the next step's device; dK, dV after the last step too, which brings them home
            _pass_on(devices, ("K_in", "V_in", "dK_in", "dV_in") if t < P - 1 else ("dK_in", "dV_in"), t)
    for chip in devices.chips:
        n, d = chip.hbm.tensors["Q_p"].shape
        dtype = chip.hbm.tensors["Q_p"].dtype
        for run, out in (("dQ_run", "dQ_p"), ("dK_in", "dK_p"), ("dV_in", "dV_p")):
            chip.hbm.alloc(out, (n, d), dtype)
            _rows(chip, n, Bm, "final", f"{out} = {run} in the storage dtype", _cast, run, out)


def _pass_on(devices: Devices, names: tuple[str, ...], t: int) -> None:
    """Every device sends `names` to the next and receives the previous one's (a step in the traced device's trace)."""
    devices.ring(names)
    P = devices.P
    for p, chip in enumerate(devices.chips):
        s, came = (p - t) % P, (p - t - 1) % P
        text = (f"Send {', '.join(names)} (shard {s}) to device {(p + 1) % P} and receive shard {came}'s from "
                f"device {(p - 1) % P}, while step {t}'s attention runs")  # fmt: skip
        with chip.step("exchange", None, text, phase=f"ring step {t}: K/V shard {s}"):
            pass


def _attend(chip: Chip, piece: Piece, *, Br: int, Bc: int, scale: float) -> None:
    """FlashAttention-2 of the piece's query rows against its keys: O_t (storage dtype) and L_t (float32) in HBM."""
    (q0, q1), (k0, k1) = piece.q, piece.kv
    chip.hbm.place("Q", chip.hbm.tensors["Q_p"][q0:q1])  # a view: the kernel is handed an offset, nothing moves
    chip.hbm.place("K", chip.hbm.tensors["K_in"][k0:k1])
    chip.hbm.place("V", chip.hbm.tensors["V_in"][k0:k1])
    flash2.forward(chip, Br=Br, Bc=Bc, scale=scale, causal=piece.causal)


def _differentiate(chip: Chip, piece: Piece, *, Br: int, Bc: int, scale: float) -> None:
    """FlashAttention-2's backward of the piece, from the global O, dO and L: dQ_t, dK_t, dV_t in HBM."""
    (q0, q1), (k0, k1) = piece.q, piece.kv
    for name, src, r0, r1 in (("Q", "Q_p", q0, q1), ("O", "O_p", q0, q1), ("dO", "dO_p", q0, q1),
                              ("L", "L_p", q0, q1), ("K", "K_in", k0, k1), ("V", "V_in", k0, k1)):  # fmt: skip
        chip.hbm.place(name, chip.hbm.tensors[src][r0:r1])
    flash2_backward.backward(chip, Br=Br, Bc=Bc, scale=scale, causal=piece.causal)


def _rows(chip: Chip, n: int, B: int, phase: str, text: str, work, *args) -> None:
    """`work(chip, rows, *args)` on each block of B rows of n: a pass over a shard's rows, a block at a time in SRAM."""
    for i in range(ceil(n / B)):
        rows = (i * B, min((i + 1) * B, n))
        with chip.step("store" if phase in ("init", "final") else "compute", None, text, i=i, phase=phase):
            work(chip, rows, *args)


def _init_run(chip: Chip, rows) -> None:
    r = rows[1] - rows[0]
    empty = SoftmaxState.empty(r, ACCUMULATOR)  # the identity of ⊕
    chip.store("O_run", chip.put("O_0", np.zeros((r, chip.hbm.tensors["O_run"].shape[1]))), rows)
    chip.store("L_run", chip.put("L_0", empty.m), rows)
    chip.free("O_0", "L_0")


def _zero(chip: Chip, rows, name: str) -> None:
    chip.store(name, chip.put("zero", np.zeros((rows[1] - rows[0], chip.hbm.tensors[name].shape[1]))), rows)
    chip.free("zero")


def _merge(chip: Chip, rows, q0: int) -> None:
    """(O_run, L_run) ⊕ (O_t, L_t) on a block of rows: both states are (L, ℓ = 1), so ℓ = α + β after it."""
    at = (q0 + rows[0], q0 + rows[1])  # the same rows of the shard
    O_run, L_run = chip.load("O_run", "O_run", at), chip.load("L_run", "L_run", at)  # (B, d), (B,) float32
    O_t, L_t = chip.load("O_t", "O", rows), chip.load("L_t", "L", rows)  # (B, d) storage dtype, (B,) float32
    new, α, β = SoftmaxState.from_lse(L_run).rescale(SoftmaxState.from_lse(L_t), exp=chip.exp)
    O_new = chip.put("O_new", normalize(α[:, None] * O_run + β[:, None] * O_t, new.ℓ))  # (B, d)
    L_new = chip.put("L_new", new.lse)  # (B,)
    chip.elementwise(6 * len(α) + 4 * O_new.size)  # max, two −, α + β; log, +; α·, β·, +, ÷ℓ
    chip.store("O_run", O_new, at)
    chip.store("L_run", L_new, at)
    chip.free("O_run", "L_run", "O_t", "L_t", "O_new", "L_new")


def _add(chip: Chip, rows, part: str, run: str, r0: int) -> None:
    """run[r0 + rows] += part[rows]: a float32 accumulator in HBM takes one step's gradient."""
    at = (r0 + rows[0], r0 + rows[1])
    total = chip.put("sum", chip.load("acc", run, at) + chip.load("part", part, rows))
    chip.elementwise(total.size)
    chip.store(run, total, at)
    chip.free("acc", "part", "sum")


def _cast(chip: Chip, rows, run: str, out: str) -> None:
    chip.store(out, chip.load("run", run, rows), rows)  # rounded to the storage dtype as it is written
    chip.free("run")


def _mark(chip: Chip) -> int:
    return 0 if chip.trace is None else len(chip.trace.steps)


def _label(chip: Chip, mark: int, t: int, s: int) -> None:
    """Name the ring step and the shard in hand on the steps the traced device just took."""
    if chip.trace is not None:
        for step in chip.trace.steps[mark:]:
            step.phase = f"ring step {t}: K/V shard {s}" + (f" · {step.phase}" if step.phase else "")
