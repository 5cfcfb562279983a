"""Standard attention (the FlashAttention paper's Algorithm 0): S and P are written to HBM.

Three kernels, each streaming tiles through SRAM:
  line 1  S = τ Q Kᵀ, tile by tile, written to HBM;
  line 2  P = softmax(S), a block of whole rows at a time, written to HBM;
  line 3  O = P V, tile by tile, written to HBM.
The count follows the generous assumption of the paper's Theorem 2: each operand of a
matmul comes from HBM once. The tiles a matmul reads again (K_j for every Q block, V_j
for every P block) are booked at level "l2", not "hbm", so they show in the ledger
without counting as HBM traffic.
"""

from math import ceil

import numpy as np

from sim.algorithms.softmax import SoftmaxState, normalize
from sim.machine import mask
from sim.machine.blocks import softmax_rows
from sim.machine.memory import Chip


def forward(chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: None = None) -> None:
    """Read Q, K, V from HBM; write S, P and O (all in the storage dtype) to HBM. Algorithm 0 has no dropout."""
    Q = chip.hbm.tensors["Q"]
    N, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
    Tr, Tc = ceil(N / Br), ceil(Nk / Bc)
    for name, shape in (("S", (N, Nk)), ("P", (N, Nk)), ("O", (N, d))):
        chip.hbm.alloc(name, shape, Q.dtype)

    # line 1: Load Q, K by blocks from HBM, compute S = τ Q Kᵀ, write S to HBM.
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            with chip.step("load", 1, "Load Q_i, K_j from HBM to SRAM", i, j, phase="S = τQKᵀ"):
                if j == 0:
                    Q_i = chip.load("Q_i", "Q", rows)  # (Br, d) SRAM, kept for the whole row of tiles
                K_j = chip.load("K_j", "K", cols, cached=i > 0)  # (Bc, d) SRAM
            with chip.step("compute", 1, "On chip, compute S_ij = τ Q_i K_jᵀ", i, j, phase="S = τQKᵀ"):
                S_ij = chip.put("S_ij", scale * chip.matmul(Q_i, K_j.T))  # (Br, Bc)
                chip.elementwise(S_ij.size)  # τ·
            with chip.step("store", 1, "Write S_ij to HBM", i, j, phase="S = τQKᵀ"):
                chip.store("S", S_ij, rows, cols)
            chip.free("K_j", "S_ij")
        chip.free("Q_i")

    # line 2: Read S from HBM, compute P = softmax(S), write P to HBM — whole rows at a time.
    Bs = softmax_rows(N, Nk, chip.sram.capacity)
    for i in range(ceil(N / Bs)):
        rows = (i * Bs, min((i + 1) * Bs, N))
        with chip.step("load", 2, "Load S_i (whole rows) from HBM to SRAM", i, phase="P = softmax(S)"):
            S_i = chip.load("S_i", "S", rows)  # (Bs, Nk) SRAM
        with chip.step("compute", 2, "On chip, compute P_i = softmax(S_i) row by row", i, phase="P = softmax(S)"):
            if causal:
                S_i = np.where(mask.visible(*rows, 0, Nk, N, Nk), S_i, -np.inf)
                chip.elementwise(S_i.size)  # the mask's select
            rows_state, P̃_i = SoftmaxState.block(S_i, exp=chip.exp)  # (m_i, ℓ_i) of whole rows: exact at once
            chip.put("m_i", rows_state.m)  # (Bs,), in SRAM beside P_i
            P_i = chip.put("P_i", P̃_i, replaces=["S_i"])  # (Bs, Nk)
            ℓ_i = chip.put("ℓ_i", rows_state.ℓ)  # (Bs,)
            P_i = chip.put("P_i", normalize(P_i, ℓ_i))
            chip.elementwise(4 * P_i.size)  # rowmax, S_i − m_i, rowsum, ÷ℓ_i
        with chip.step("store", 2, "Write P_i to HBM", i, phase="P = softmax(S)"):
            chip.store("P", P_i, rows)
        chip.free("P_i", "m_i", "ℓ_i")

    # line 3: Load P and V by blocks from HBM, compute O = P V, write O to HBM.
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        O_i = chip.put("O_i", np.zeros((rows[1] - rows[0], d)))  # (Br, d) SRAM accumulator
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            with chip.step("load", 3, "Load P_ij, V_j from HBM to SRAM", i, j, phase="O = PV"):
                P_ij = chip.load("P_ij", "P", rows, cols)  # (Br, Bc) SRAM
                V_j = chip.load("V_j", "V", cols, cached=i > 0)  # (Bc, d) SRAM
            with chip.step("compute", 3, "On chip, O_i ← O_i + P_ij V_j", i, j, phase="O = PV"):
                O_i = chip.put("O_i", O_i + chip.matmul(P_ij, V_j))
            chip.free("P_ij", "V_j")
        with chip.step("store", 3, "Write O_i to HBM", i, phase="O = PV"):
            chip.store("O", O_i, rows)
        chip.free("O_i")
