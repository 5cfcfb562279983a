"""FlashAttention-2's backward pass (the FlashAttention-2 paper's Algorithm 2): P rebuilt from the log-sum-exp.

D = rowsum(dO ∘ O) is computed once in a pre-pass and written; P_ij is rebuilt from the
log-sum-exp L_i; dK_j, dV_j stay on chip and are written once; dQ_i is read, updated and
written back for every tile (so it is rounded to the storage dtype each time). With a
causal mask, a Q block that sees none of K_j is skipped. Dropout as in FlashAttention's
Algorithm 4 (lines 14–18): each tile's mask Z_ij is drawn again from the seed.
"""

from math import ceil

import numpy as np

from sim.algorithms.dropout import Dropout
from sim.algorithms.scores import Scores, plain
from sim.algorithms.softmax import SoftmaxState
from sim.machine.memory import Chip


def backward(
    chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None,
    scores: Scores | None = None,
) -> None:  # fmt: skip
    """Read Q, K, V, O, dO, L from HBM; write D (float32) and dQ, dK, dV (storage dtype) to HBM.

    Line 9 of the listing also names O_i and dQ_i: after the pre-pass only D_i needs O, and
    dQ_i is loaded where line 15 updates it, so neither is read there. With a causal mask a
    Q block that sees none of K_j is skipped and not read (FlashAttention-2's causal saving).
    """
    Q = chip.hbm.tensors["Q"]
    N, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
    scores = scores or plain(N, Nk, causal)
    Tr, Tc = ceil(N / Br), ceil(Nk / Bc)  # lines 1–2: Q, O, dO, L in Tr blocks of Br rows; K, V in Tc of Bc
    for name, shape in (("dQ", (N, d)), ("dK", (Nk, d)), ("dV", (Nk, d))):
        chip.hbm.alloc(name, shape, Q.dtype)
    chip.hbm.alloc("D", (N,), np.float32)

    for i in range(Tr):  # lines 3–4, the pre-pass, block by block
        rows = (i * Br, min((i + 1) * Br, N))
        with chip.step("init", 3, "Initialize dQ_i = 0 in HBM", i=i):
            chip.store("dQ", chip.put("dQ_i", np.zeros((rows[1] - rows[0], d))), rows)
        chip.free("dQ_i")
        with chip.step("load", 4, "Load O_i, dO_i from HBM to on-chip SRAM", i=i):
            O_i = chip.load("O_i", "O", rows)  # (Br, d) SRAM
            dO_i = chip.load("dO_i", "dO", rows)  # (Br, d) SRAM
        with chip.step("compute", 4, "On chip, compute D_i = rowsum(dO_i ∘ O_i)", i=i):
            D_i = chip.put("D_i", (dO_i * O_i).sum(axis=1))  # (Br,)
            chip.elementwise(2 * O_i.size)  # ∘, rowsum
        with chip.step("store", 4, "Write D_i to HBM", i=i):
            chip.store("D", D_i, rows)
        chip.free("O_i", "dO_i", "D_i")

    for j in range(Tc):  # line 5
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        with chip.step("load", 6, "Load K_j, V_j from HBM to on-chip SRAM", j=j):
            K_j = chip.load("K_j", "K", cols)  # (Bc, d) SRAM
            V_j = chip.load("V_j", "V", cols)  # (Bc, d) SRAM
        with chip.step("init", 7, "Initialize dK_j = 0, dV_j = 0 on SRAM", j=j):
            dK_j = chip.put("dK_j", np.zeros((cols[1] - cols[0], d)))  # (Bc, d) SRAM accumulator
            dV_j = chip.put("dV_j", np.zeros((cols[1] - cols[0], d)))  # (Bc, d) SRAM accumulator

        for i in range(Tr):  # line 8
            rows = (i * Br, min((i + 1) * Br, N))
            if not scores.rule.block_seen(rows, cols):
                with chip.step("skip", 8, f"Skip Q_i: the {scores.hiding} hides K_j, V_j from every row of Q_i", i, j):
                    chip.ledger.work["skipped"] += 1  # a tile never computed
                    continue  # never read from HBM
            with chip.step("load", 9, "Load Q_i, dO_i, L_i, D_i from HBM to on-chip SRAM", i, j):
                Q_i = chip.load("Q_i", "Q", rows)  # (Br, d) SRAM
                dO_i = chip.load("dO_i", "dO", rows)  # (Br, d) SRAM
                L_i = chip.load("L_i", "L", rows)  # (Br,) SRAM
                D_i = chip.load("D_i", "D", rows)  # (Br,) SRAM
            with chip.step("compute", 10, f"On chip, compute S_ij = τ Q_i K_jᵀ{scores.lines}", i, j):
                S_ij = scale * chip.matmul(Q_i, K_j.T)  # (Br, Bc)
                chip.elementwise(S_ij.size)  # τ·
                S_ij, T_ij = scores.apply(chip, S_ij, rows, cols)
                if T_ij is not None:
                    T_ij = chip.put("T_ij", T_ij)  # (Br, Bc) tanh(τ Q_i K_jᵀ / c), for dS_ij
                S_ij = chip.put("S_ij", S_ij)
            with chip.step("compute", 11, "On chip, compute P_ij = exp(S_ij − L_i)", i, j):
                P_ij = SoftmaxState.from_lse(L_i).probabilities(S_ij, exp=chip.exp)  # exp(S_ij − L_i)
                P_ij = chip.put("P_ij", P_ij, replaces=["S_ij"])  # (Br, Bc)
                chip.elementwise(P_ij.size)  # − L_i
            P_drop = P_ij
            if dropout is not None:
                with chip.step("compute", None, "As FA1's Algorithm 4, lines 14–15: P_ij^dropped = P_ij ∘ Z_ij", i, j):
                    Z_ij = dropout.mask(rows, cols)  # (Br, Bc) in registers, drawn again from the seed
                    P_drop = chip.put("P_ij^dropped", P_ij * Z_ij)  # (Br, Bc)
                    chip.elementwise(P_drop.size)  # ∘ Z_ij
            with chip.step("compute", 12, "On chip, compute dV_j ← dV_j + P_ijᵀ dO_i", i, j):
                dV_j = chip.put("dV_j", dV_j + chip.matmul(P_drop.T, dO_i))  # (Bc, d)
            chip.free("P_ij^dropped")
            with chip.step("compute", 13, "On chip, compute dP_ij = dO_i V_jᵀ", i, j):
                dP_ij = chip.put("dP_ij", chip.matmul(dO_i, V_j.T))  # (Br, Bc)
                if dropout is not None:  # as Algorithm 4, line 18
                    dP_ij = chip.put("dP_ij", dP_ij * Z_ij)
                    chip.elementwise(dP_ij.size)  # ∘ Z_ij
            with chip.step("compute", 14, "On chip, compute dS_ij = P_ij ∘ (dP_ij − D_i)", i, j):
                dS_ij = chip.put("dS_ij", P_ij * (dP_ij - D_i[:, None]), replaces=["dP_ij"])  # (Br, Bc)
                chip.elementwise(2 * dS_ij.size)  # −, ∘
                dS_ij = chip.put("dS_ij", scores.through_softcap(chip, dS_ij, T_ij))  # ∘ (1 − T_ij²), in place
            chip.free("P_ij", "T_ij")
            with chip.step("load", 15, "Load dQ_i from HBM to SRAM", i, j):
                dQ_i = chip.load("dQ_i", "dQ", rows)  # (Br, d) SRAM
            with chip.step("store", 15, "On chip, update dQ_i ← dQ_i + τ dS_ij K_j, and write back to HBM", i, j):
                dQ_i = chip.put("dQ_i", dQ_i + scale * chip.matmul(dS_ij, K_j))  # (Br, d)
                chip.elementwise(dQ_i.size)  # τ·
                chip.store("dQ", dQ_i, rows)
            with chip.step("compute", 16, "On chip, compute dK_j ← dK_j + τ dS_ijᵀ Q_i", i, j):
                dK_j = chip.put("dK_j", dK_j + scale * chip.matmul(dS_ij.T, Q_i))  # (Bc, d)
                chip.elementwise(dK_j.size)  # τ·
            chip.free("Q_i", "dO_i", "L_i", "D_i", "dS_ij", "dQ_i")

        with chip.step("store", 18, "Write dK_j, dV_j to HBM", j=j):
            chip.store("dK", dK_j, cols)
            chip.store("dV", dV_j, cols)
        chip.free("K_j", "V_j", "dK_j", "dV_j")
