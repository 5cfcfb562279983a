"""Standard attention's backward pass (the FlashAttention paper's Algorithm 3): it reads the stored P.

Five kernels: dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − D) on whole rows, dQ = τ dS K,
dK = τ dSᵀ Q; P (N × Nk) is read from HBM and dP and dS (N × Nk) are written to it.
With S = τ Q Kᵀ the gradients carry τ (Algorithm 4, lines 21–22).
"""

from math import ceil

import numpy as np

from sim.algorithms.dropout import Dropout
from sim.machine.blocks import whole_rows
from sim.machine.memory import Chip


def backward(chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None) -> None:
    """Read Q, K, V, dO and P from HBM; write dP, dS and dQ, dK, dV (all in the storage dtype) to HBM.

    As in the forward count (Theorem 2's generous assumption), each kernel reads each of
    its operands from HBM once; the tiles a matmul reads again are booked at level "l2".
    P is zero where the causal mask hid a score, so dS is too: no mask is needed here. Algorithm 3
    has no dropout.
    """
    Q = chip.hbm.tensors["Q"]
    N, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
    Tr, Tc = ceil(N / Br), ceil(Nk / Bc)
    for name, shape in (("dV", (Nk, d)), ("dP", (N, Nk)), ("dS", (N, Nk)), ("dQ", (N, d)), ("dK", (Nk, d))):
        chip.hbm.alloc(name, shape, Q.dtype)

    # line 1: Load P, dO by blocks from HBM, compute dV = Pᵀ dO, write dV to HBM.
    for j in range(Tc):
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        dV_j = chip.put("dV_j", np.zeros((cols[1] - cols[0], d)))  # (Bc, d) SRAM accumulator
        for i in range(Tr):
            rows = (i * Br, min((i + 1) * Br, N))
            with chip.step("load", 1, "Load P_ij, dO_i from HBM to SRAM", i, j, phase="dV = PᵀdO"):
                P_ij = chip.load("P_ij", "P", rows, cols)  # (Br, Bc) SRAM
                dO_i = chip.load("dO_i", "dO", rows, cached=j > 0)  # (Br, d) SRAM
            with chip.step("compute", 1, "On chip, dV_j ← dV_j + P_ijᵀ dO_i", i, j, phase="dV = PᵀdO"):
                dV_j = chip.put("dV_j", dV_j + chip.matmul(P_ij.T, dO_i))
            chip.free("P_ij", "dO_i")
        with chip.step("store", 1, "Write dV_j to HBM", j=j, phase="dV = PᵀdO"):
            chip.store("dV", dV_j, cols)
        chip.free("dV_j")

    # line 2: Load dO, V by blocks from HBM, compute dP = dO Vᵀ, write dP to HBM.
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            with chip.step("load", 2, "Load dO_i, V_j from HBM to SRAM", i, j, phase="dP = dOVᵀ"):
                if j == 0:
                    dO_i = chip.load("dO_i", "dO", rows)  # (Br, d) SRAM, kept for the whole row of tiles
                V_j = chip.load("V_j", "V", cols, cached=i > 0)  # (Bc, d) SRAM
            with chip.step("compute", 2, "On chip, dP_ij = dO_i V_jᵀ", i, j, phase="dP = dOVᵀ"):
                dP_ij = chip.put("dP_ij", chip.matmul(dO_i, V_j.T))  # (Br, Bc)
            with chip.step("store", 2, "Write dP_ij to HBM", i, j, phase="dP = dOVᵀ"):
                chip.store("dP", dP_ij, rows, cols)
            chip.free("V_j", "dP_ij")
        chip.free("dO_i")

    # line 3: Read P, dP from HBM, compute dS_ij = P_ij (dP_ij − Σ_l P_il dP_il), write dS — whole rows at a time.
    Bs = whole_rows(N, Nk, Q.dtype.itemsize, chip.sram.capacity)
    for i in range(ceil(N / Bs)):
        rows = (i * Bs, min((i + 1) * Bs, N))
        with chip.step("load", 3, "Load P_i, dP_i (whole rows) from HBM to SRAM", i, phase="dS = P∘(dP − D)"):
            P_i = chip.load("P_i", "P", rows)  # (Bs, Nk) SRAM
            dP_i = chip.load("dP_i", "dP", rows)  # (Bs, Nk) SRAM
        with chip.step(
            "compute", 3, "On chip, D_i = rowsum(P_i ∘ dP_i), dS_i = P_i ∘ (dP_i − D_i)", i, phase="dS = P∘(dP − D)"
        ):
            D_i = chip.put("D_i", (P_i * dP_i).sum(axis=1))  # (Bs,)
            dS_i = chip.put("dS_i", P_i * (dP_i - D_i[:, None]), replaces=["dP_i"])  # (Bs, Nk)
            chip.elementwise(4 * dS_i.size)  # P ∘ dP, rowsum, dP − D, P ∘ (…)
        with chip.step("store", 3, "Write dS_i to HBM", i, phase="dS = P∘(dP − D)"):
            chip.store("dS", dS_i, rows)
        chip.free("P_i", "dS_i", "D_i")

    # line 4: Load dS and K by blocks from HBM, compute dQ = τ dS K, write dQ to HBM.
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        dQ_i = chip.put("dQ_i", np.zeros((rows[1] - rows[0], d)))  # (Br, d) SRAM accumulator
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            with chip.step("load", 4, "Load dS_ij, K_j from HBM to SRAM", i, j, phase="dQ = τdSK"):
                dS_ij = chip.load("dS_ij", "dS", rows, cols)  # (Br, Bc) SRAM
                K_j = chip.load("K_j", "K", cols, cached=i > 0)  # (Bc, d) SRAM
            with chip.step("compute", 4, "On chip, dQ_i ← dQ_i + dS_ij K_j", i, j, phase="dQ = τdSK"):
                dQ_i = chip.put("dQ_i", dQ_i + chip.matmul(dS_ij, K_j))
            chip.free("dS_ij", "K_j")
        with chip.step("store", 4, "Write dQ_i ← τ dQ_i to HBM", i, phase="dQ = τdSK"):
            dQ_i = chip.put("dQ_i", scale * dQ_i)
            chip.elementwise(dQ_i.size)  # τ·
            chip.store("dQ", dQ_i, rows)
        chip.free("dQ_i")

    # line 5: Load dS and Q by blocks from HBM, compute dK = τ dSᵀ Q, write dK to HBM.
    for j in range(Tc):
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        dK_j = chip.put("dK_j", np.zeros((cols[1] - cols[0], d)))  # (Bc, d) SRAM accumulator
        for i in range(Tr):
            rows = (i * Br, min((i + 1) * Br, N))
            with chip.step("load", 5, "Load dS_ij, Q_i from HBM to SRAM", i, j, phase="dK = τdSᵀQ"):
                dS_ij = chip.load("dS_ij", "dS", rows, cols)  # (Br, Bc) SRAM
                Q_i = chip.load("Q_i", "Q", rows, cached=j > 0)  # (Br, d) SRAM
            with chip.step("compute", 5, "On chip, dK_j ← dK_j + dS_ijᵀ Q_i", i, j, phase="dK = τdSᵀQ"):
                dK_j = chip.put("dK_j", dK_j + chip.matmul(dS_ij.T, Q_i))
            chip.free("dS_ij", "Q_i")
        with chip.step("store", 5, "Write dK_j ← τ dK_j to HBM", j=j, phase="dK = τdSᵀQ"):
            dK_j = chip.put("dK_j", scale * dK_j)
            chip.elementwise(dK_j.size)  # τ·
            chip.store("dK", dK_j, cols)
        chip.free("dK_j")
