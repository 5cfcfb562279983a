"""FlashAttention's backward pass (the FlashAttention paper's Algorithm 4): P rebuilt on chip, tile by tile.

Outer loop over K/V blocks; P_ij is rebuilt on chip from the forward's statistics ℓ_i and
m_i; D_i = rowsum(dO_i ∘ O_i) is computed again for every tile. With S = τ Q Kᵀ the
gradients carry τ: dQ = τ dS K, dK = τ dSᵀ Q (lines 21–22). Dropout (lines 14–18)
regenerates each tile's mask Z_ij from the forward pass's seed (`sim.algorithms.dropout`); the mask
lives in registers and never touches SRAM or HBM. dQ stays in HBM in the storage dtype,
so it is rounded at each write-back.
"""

from math import ceil

import numpy as np

from sim.algorithms.dropout import Dropout
from sim.algorithms.softmax import SoftmaxState
from sim.machine import mask
from sim.machine.memory import Chip


def backward(chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None) -> None:
    """Read Q, K, V, O, dO, ℓ, m from HBM; write dQ, dK, dV (storage dtype) to HBM.

    Followed literally: line 5 zeroes dQ, dK and dV in HBM (line 24 then overwrites dK and
    dV), and line 19 computes D_i again for every K/V block. Like Algorithm 1 it skips no
    tile; the causal mask is applied to S_ij.
    """
    Q = chip.hbm.tensors["Q"]
    N, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
    Tr, Tc = ceil(N / Br), ceil(Nk / Bc)  # lines 2–4: Q, O, dO, ℓ, m in Tr blocks of Br rows; K, V in Tc of Bc
    for name, shape in (("dQ", (N, d)), ("dK", (Nk, d)), ("dV", (Nk, d))):
        chip.hbm.alloc(name, shape, Q.dtype)

    for i in range(Tr):  # line 5, block by block: initialize dQ = 0 in HBM
        rows = (i * Br, min((i + 1) * Br, N))
        with chip.step("init", 5, "Initialize dQ_i = 0 in HBM", i=i):
            chip.store("dQ", chip.put("dQ_i", np.zeros((rows[1] - rows[0], d))), rows)
        chip.free("dQ_i")
    for j in range(Tc):  # line 5: initialize dK = 0, dV = 0 in HBM
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        with chip.step("init", 5, "Initialize dK_j = 0, dV_j = 0 in HBM", j=j):
            zeros = chip.put("0_j", np.zeros((cols[1] - cols[0], d)))
            chip.store("dK", zeros, cols)
            chip.store("dV", zeros, cols)
        chip.free("0_j")

    for j in range(Tc):  # line 6
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        with chip.step("load", 7, "Load K_j, V_j from HBM to on-chip SRAM", j=j):
            K_j = chip.load("K_j", "K", cols)  # (Bc, d) SRAM
            V_j = chip.load("V_j", "V", cols)  # (Bc, d) SRAM
        with chip.step("init", 8, "Initialize d̃K_j = 0, d̃V_j = 0 on SRAM", j=j):
            dK_j = chip.put("dK_j", np.zeros((cols[1] - cols[0], d)))  # (Bc, d) SRAM accumulator
            dV_j = chip.put("dV_j", np.zeros((cols[1] - cols[0], d)))  # (Bc, d) SRAM accumulator

        for i in range(Tr):  # line 9
            rows = (i * Br, min((i + 1) * Br, N))
            with chip.step("load", 10, "Load Q_i, O_i, dO_i, dQ_i, ℓ_i, m_i from HBM to on-chip SRAM", i, j):
                Q_i = chip.load("Q_i", "Q", rows)  # (Br, d) SRAM
                O_i = chip.load("O_i", "O", rows)  # (Br, d) SRAM
                dO_i = chip.load("dO_i", "dO", rows)  # (Br, d) SRAM
                dQ_i = chip.load("dQ_i", "dQ", rows)  # (Br, d) SRAM
                ℓ_i = chip.load("ℓ_i", "ℓ", rows)  # (Br,) SRAM
                m_i = chip.load("m_i", "m", rows)  # (Br,) SRAM
            with chip.step("compute", 11, "On chip, compute S_ij = τ Q_i K_jᵀ", i, j):
                S_ij = chip.put("S_ij", scale * chip.matmul(Q_i, K_j.T))  # (Br, Bc)
                chip.elementwise(S_ij.size)  # τ·
            if causal and not mask.block_fully_seen(rows[0], cols[1], N, Nk):
                with chip.step("compute", 12, "On chip, compute S_ij^masked = MASK(S_ij)", i, j):
                    S_ij = chip.put("S_ij", mask.hide(chip, S_ij, rows, cols, N, Nk))
            with chip.step("compute", 13, "On chip, compute P_ij = diag(ℓ_i)⁻¹ exp(S_ij^masked − m_i)", i, j):
                P_ij = SoftmaxState(m_i, ℓ_i).probabilities(S_ij, exp=chip.exp)  # the forward's softmax, rebuilt
                P_ij = chip.put("P_ij", P_ij, replaces=["S_ij"])  # (Br, Bc)
                chip.elementwise(2 * P_ij.size)  # − m_i, ÷ℓ_i
            P_drop = P_ij
            if dropout is not None:
                with chip.step("compute", 14, "On chip, compute dropout mask Z_ij (drawn again from the seed)", i, j):
                    Z_ij = dropout.mask(rows, cols)  # (Br, Bc) in registers: never in SRAM, never in HBM
                with chip.step("compute", 15, "On chip, compute P_ij^dropped = P_ij ∘ Z_ij", i, j):
                    P_drop = chip.put("P_ij^dropped", P_ij * Z_ij)  # (Br, Bc)
                    chip.elementwise(P_drop.size)  # ∘ Z_ij
            with chip.step("compute", 16, "On chip, compute d̃V_j ← d̃V_j + (P_ij^dropped)ᵀ dO_i", i, j):
                dV_j = chip.put("dV_j", dV_j + chip.matmul(P_drop.T, dO_i))  # (Bc, d)
            chip.free("P_ij^dropped")
            with chip.step("compute", 17, "On chip, compute dP_ij^dropped = dO_i V_jᵀ", i, j):
                dP_ij = chip.put("dP_ij", chip.matmul(dO_i, V_j.T))  # (Br, Bc)
            if dropout is not None:
                with chip.step("compute", 18, "On chip, compute dP_ij = dP_ij^dropped ∘ Z_ij", i, j):
                    dP_ij = chip.put("dP_ij", dP_ij * Z_ij)
                    chip.elementwise(dP_ij.size)  # ∘ Z_ij
            with chip.step("compute", 19, "On chip, compute D_i = rowsum(dO_i ∘ O_i)", i, j):
                D_i = chip.put("D_i", (dO_i * O_i).sum(axis=1))  # (Br,)
                chip.elementwise(2 * O_i.size)  # ∘, rowsum
            chip.free("O_i")
            with chip.step("compute", 20, "On chip, compute dS_ij = P_ij ∘ (dP_ij − D_i)", i, j):
                dS_ij = chip.put("dS_ij", P_ij * (dP_ij - D_i[:, None]), replaces=["dP_ij"])  # (Br, Bc)
                chip.elementwise(2 * dS_ij.size)  # −, ∘
            chip.free("P_ij")
            with chip.step("store", 21, "Write dQ_i ← dQ_i + τ dS_ij K_j to HBM", i, j):
                dQ_i = chip.put("dQ_i", dQ_i + scale * chip.matmul(dS_ij, K_j))  # (Br, d)
                chip.elementwise(dQ_i.size)  # τ·
                chip.store("dQ", dQ_i, rows)
            with chip.step("compute", 22, "On chip, compute d̃K_j ← d̃K_j + τ dS_ijᵀ Q_i", i, j):
                dK_j = chip.put("dK_j", dK_j + scale * chip.matmul(dS_ij.T, Q_i))  # (Bc, d)
                chip.elementwise(dK_j.size)  # τ·
            chip.free("Q_i", "dO_i", "dQ_i", "ℓ_i", "m_i", "D_i", "dS_ij")

        with chip.step("store", 24, "Write dK_j ← d̃K_j, dV_j ← d̃V_j to HBM", j=j):
            chip.store("dK", dK_j, cols)
            chip.store("dV", dV_j, cols)
        chip.free("K_j", "V_j", "dK_j", "dV_j")
