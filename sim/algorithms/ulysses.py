"""DeepSpeed-Ulysses (Jacobs et al., 2023): swap the sequence split for a head split with two all-to-alls.

Device p starts with rows n_p of every head. The first all-to-all sends each device the heads it will own
(H/P of them) for every row; each device runs FlashAttention-2 (`sim.algorithms.flash2`) on whole heads; the
second all-to-all returns every device its rows of every head. Backward: dO takes the first road, dQ, dK, dV
the second; O and L stay where the forward left them, in the head layout.
"""

import numpy as np

from sim.algorithms import flash2, flash2_backward
from sim.machine.devices import Devices


def forward(devices: Devices, *, H: int, Br: int, Bc: int, scale: float, causal: bool) -> None:
    """Each device: Q_p, K_p, V_p (H, n_p, d) in HBM → O_p (H, n_p, d); O_heads, L_heads (H/P, N, ·) kept."""
    _to_heads(devices, H, ("Q", "K", "V"))
    for chip in devices.chips:
        own = chip.hbm.tensors["Q_heads"].shape[0]
        outs = {}
        for h in range(own):  # whole heads, one after another, as the single-GPU pass
            for X in ("Q", "K", "V"):
                chip.hbm.place(X, chip.hbm.tensors[f"{X}_heads"][h])
            flash2.forward(chip, Br=Br, Bc=Bc, scale=scale, causal=causal)
            outs.setdefault("O", []).append(chip.hbm.tensors["O"])
            outs.setdefault("L", []).append(chip.hbm.tensors["L"])
        for X, parts in outs.items():  # each head's kernel wrote at its offset of one (H/P, N, ·) tensor
            chip.hbm.place(f"{X}_heads", np.stack(parts))
    _to_sequence(devices, ("O",))


def backward(devices: Devices, *, H: int, Br: int, Bc: int, scale: float, causal: bool) -> None:
    """Each device: dO_p (H, n_p, d) and the forward's head-layout tensors → dQ_p, dK_p, dV_p (H, n_p, d)."""
    _to_heads(devices, H, ("dO",))
    for chip in devices.chips:
        grads = {}
        for h in range(chip.hbm.tensors["Q_heads"].shape[0]):
            for X in ("Q", "K", "V", "O", "L", "dO"):
                chip.hbm.place(X, chip.hbm.tensors[f"{X}_heads"][h])
            flash2_backward.backward(chip, Br=Br, Bc=Bc, scale=scale, causal=causal)
            for X in ("dQ", "dK", "dV"):
                grads.setdefault(X, []).append(chip.hbm.tensors[X])
        for X, parts in grads.items():
            chip.hbm.place(f"{X}_heads", np.stack(parts))
    _to_sequence(devices, ("dQ", "dK", "dV"))


def _to_heads(devices: Devices, H: int, names) -> None:
    """All-to-all: device p's rows of device r's heads go to r, which lays them out as X_heads (H/P, N, d)."""
    P, per = devices.P, H // devices.P
    devices.exchange([
        (p, r, {f"{X}_from{p}": devices.chips[p].hbm.tensors[f"{X}_p"][r * per : (r + 1) * per] for X in names})
        for p in range(P) for r in range(P)
    ])  # fmt: skip
    for chip in devices.chips:
        for X in names:  # the all-to-all writes each sender's rows at their offset: a layout, nothing moves
            chip.hbm.place(f"{X}_heads", np.concatenate([chip.hbm.tensors[f"{X}_from{p}"] for p in range(P)], axis=1))


def _to_sequence(devices: Devices, names) -> None:
    """All-to-all back: device r's heads of device p's rows go to p, which lays them out as X_p (H, n_p, d)."""
    P = devices.P
    bounds = np.cumsum([0] + [c.hbm.tensors["Q_p"].shape[1] for c in devices.chips])
    devices.exchange([
        (r, p, {f"{X}_from{r}": devices.chips[r].hbm.tensors[f"{X}_heads"][:, bounds[p] : bounds[p + 1]]
                for X in names})
        for r in range(P) for p in range(P)
    ])  # fmt: skip
    for chip in devices.chips:
        for X in names:
            chip.hbm.place(f"{X}_p", np.concatenate([chip.hbm.tensors[f"{X}_from{r}"] for r in range(P)], axis=0))
