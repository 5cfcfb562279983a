"""The backward pass: standard attention reads the stored P; FlashAttention recomputes it, tile by tile.

Three listings, each followed line by line:
  standard  the FlashAttention paper's Algorithm 3: five kernels that read P (N × Nk)
            from HBM and write dP and dS (N × Nk) to it;
  flash1    the FlashAttention paper's Algorithm 4: outer loop over K/V blocks; P_ij rebuilt
            on chip from ℓ_i and m_i; D_i = rowsum(dO_i ∘ O_i) computed again for every tile;
  flash2    the FlashAttention-2 paper's Algorithm 2: D computed once in a pre-pass and
            written; P_ij rebuilt from the log-sum-exp L_i; dK_j, dV_j kept on chip and
            written once; dQ_i read, updated and written back for every tile.
With S = τ Q Kᵀ the gradients carry τ: dQ = τ dS K, dK = τ dSᵀ Q (Algorithm 4, lines 21–22).
Dropout (Algorithm 4, lines 14–18) regenerates each tile's mask Z_ij from the forward
pass's seed (`sim.dropout`); the mask lives in registers and never touches SRAM or HBM.
The listings keep dQ in HBM in the storage dtype, so it is rounded at each write-back.
"""

from math import ceil

import numpy as np

from sim import blocks as blocks_
from sim import mask
from sim.dropout import Dropout
from sim.dtypes import F
from sim.errors import InputError, SRAMOverflowError
from sim.format import human_bytes
from sim.memory import Chip
from sim.softmax import shift


def _div(x: np.ndarray, ℓ: np.ndarray) -> np.ndarray:
    """x / ℓ row by row, 0 in a row with ℓ = 0 (a query that sees no key)."""
    return np.divide(x, ℓ[:, None], out=np.zeros_like(x), where=ℓ[:, None] > 0)


# -- standard attention: Algorithm 3 ---------------------------------------------------


def whole_rows(N: int, Nk: int, s: int, sram_bytes: int) -> int:
    """How many whole rows line 3 holds: P_i and dP_i (storage dtype), then dS_i (float32) in dP_i's place, and D_i."""
    per_row = s * Nk + max(s, F) * Nk + F
    rows = sram_bytes // per_row
    if rows < 1:
        raise SRAMOverflowError(
            f"SRAM overflow: standard attention's backward holds whole rows of P, dP and dS in SRAM "
            f"({human_bytes(per_row)} for Nk={Nk}) but the SRAM has {human_bytes(sram_bytes)}"
        )
    return min(rows, N)


def standard(chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None) -> None:
    """Read Q, K, V, dO and P from HBM; write dP, dS and dQ, dK, dV (all in the storage dtype) to HBM.

    As in the forward count (Theorem 2's generous assumption), each kernel reads each of
    its operands from HBM once; the tiles a matmul reads again are booked at level "l2".
    P is zero where the causal mask hid a score, so dS is too: no mask is needed here.
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


# -- FlashAttention: Algorithm 4 -------------------------------------------------------


def flash1(chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None) -> None:
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
                P_ij = chip.put("P_ij", _div(chip.exp(S_ij - shift(m_i)[:, None]), ℓ_i), replaces=["S_ij"])
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


# -- FlashAttention-2: Algorithm 2 of the FlashAttention-2 paper -----------------------


def flash2(chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None) -> None:
    """Read Q, K, V, O, dO, L from HBM; write D (float32) and dQ, dK, dV (storage dtype) to HBM.

    Line 9 of the listing also names O_i and dQ_i: after the pre-pass only D_i needs O, and
    dQ_i is loaded where line 15 updates it, so neither is read there. With a causal mask a
    Q block that sees none of K_j is skipped and not read (FlashAttention-2's causal saving).
    """
    Q = chip.hbm.tensors["Q"]
    N, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
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
            if causal and not mask.block_seen(rows[1], cols[0], N, Nk):
                with chip.step("skip", 8, "Skip Q_i: the causal mask hides K_j, V_j from every row of Q_i", i, j):
                    continue  # never read from HBM
            with chip.step("load", 9, "Load Q_i, dO_i, L_i, D_i from HBM to on-chip SRAM", i, j):
                Q_i = chip.load("Q_i", "Q", rows)  # (Br, d) SRAM
                dO_i = chip.load("dO_i", "dO", rows)  # (Br, d) SRAM
                L_i = chip.load("L_i", "L", rows)  # (Br,) SRAM
                D_i = chip.load("D_i", "D", rows)  # (Br,) SRAM
            with chip.step("compute", 10, "On chip, compute S_ij = τ Q_i K_jᵀ", i, j):
                S_ij = scale * chip.matmul(Q_i, K_j.T)  # (Br, Bc)
                chip.elementwise(S_ij.size)  # τ·
                if causal:
                    S_ij = mask.hide(chip, S_ij, rows, cols, N, Nk)
                S_ij = chip.put("S_ij", S_ij)
            with chip.step("compute", 11, "On chip, compute P_ij = exp(S_ij − L_i)", i, j):
                P_ij = chip.put("P_ij", chip.exp(S_ij - shift(L_i)[:, None]), replaces=["S_ij"])  # (Br, Bc)
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
            chip.free("P_ij")
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


ALGORITHMS = {"standard": standard, "flash1": flash1, "flash2": flash2}


# -- SRAM: what each backward holds, and the largest blocks that fit --------------------


def footprint(algorithm: str, Br: int, Bc: int, d: int, s: int) -> dict[str, int]:
    """Bytes of each SRAM buffer at the backward pass's peak, for full Br × Bc blocks.

    Standard attention's whole-row kernel (line 3) picks its own rows (`whole_rows`).
    """
    if algorithm == "standard":  # the largest of the four matmul kernels
        kernels = [
            {"dV_j": F * Bc * d, "P_ij": s * Br * Bc, "dO_i": s * Br * d},  # line 1
            {"dO_i": s * Br * d, "V_j": s * Bc * d, "dP_ij": F * Br * Bc},  # line 2
            {"dQ_i": F * Br * d, "dS_ij": s * Br * Bc, "K_j": s * Bc * d},  # line 4
            {"dK_j": F * Bc * d, "dS_ij": s * Br * Bc, "Q_i": s * Br * d},  # line 5
        ]
        return max(kernels, key=lambda k: sum(k.values()))
    kv = {"K_j": s * Bc * d, "V_j": s * Bc * d, "dK_j": F * Bc * d, "dV_j": F * Bc * d}
    if algorithm == "flash1":  # line 19: D_i joins everything line 10 loaded, P_ij and dP_ij
        return kv | {
            "Q_i": s * Br * d,
            "O_i": s * Br * d,
            "dO_i": s * Br * d,
            "dQ_i": s * Br * d,
            "P_ij": F * Br * Bc,
            "dP_ij": F * Br * Bc,
            "ℓ_i, m_i, D_i": 3 * F * Br,
        }
    if algorithm == "flash2":  # line 14 (P_ij and dS_ij) or line 15 (dS_ij and the updated dQ_i)
        base = kv | {"Q_i": s * Br * d, "dO_i": s * Br * d, "L_i, D_i": 2 * F * Br, "dS_ij": F * Br * Bc}
        return base | ({"P_ij": F * Br * Bc} if Bc >= d else {"dQ_i": F * Br * d})
    raise InputError(f"algorithm: unknown {algorithm!r}; choose standard, flash1 or flash2")


def need(algorithm: str, Br: int, Bc: int, d: int, s: int) -> int:
    """Total SRAM bytes the backward pass needs with these blocks."""
    return sum(footprint(algorithm, Br, Bc, d, s).values())


def check_fits(algorithm: str, Br: int, Bc: int, d: int, s: int, sram_bytes: int, why: str = "") -> None:
    """Raise InputError naming every buffer if Br × Bc blocks do not fit the backward pass in `sram_bytes`."""
    blocks_.refuse_overflow(footprint(algorithm, Br, Bc, d, s), Br, Bc, sram_bytes, f"the {algorithm} backward", why)


def fit(
    algorithm: str, N: int, Nk: int, d: int, s: int, sram_bytes: int, Br: int | None = None, Bc: int | None = None
) -> tuple[int, int]:
    """The largest blocks that fit the backward pass (`sim.blocks.largest`): Bc — the outer loop's block,
    whose count Tc sets how often Q, dO and dQ are re-read — grows; given blocks are checked first.
    """
    return blocks_.largest(
        lambda br, bc: footprint(algorithm, br, bc, d, s), N, Nk, sram_bytes, f"the {algorithm} backward",
        grow=None if algorithm == "standard" else "cols", Br=Br, Bc=Bc, check_given=True,
    )  # fmt: skip


def paper_blocks(algorithm: str, N: int, Nk: int, d: int, s: int, sram_bytes: int) -> tuple[int, int]:
    """The paper's rule (Algorithm 4, line 2: Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d)), refused if it does not fit."""
    Br, Bc = blocks_.paper(sram_bytes, d, s)
    check_fits(
        algorithm, min(Br, N), min(Bc, Nk), d, s, sram_bytes, "the paper's rule Bc = ⌈M/4d⌉, Br = min(Bc, d) gives "
    )
    return Br, Bc
