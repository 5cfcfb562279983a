"""FlashAttention (Dao et al., 2022, Algorithm 1), followed literally: outer loop over K/V blocks.

K and V are read once. For every K/V block j, every Q block i is read again, and the
running O_i, ℓ_i, m_i make a round trip through HBM — which is what FlashAttention-2
later removed by swapping the loops. The causal mask is applied to S_ij; Algorithm 1
skips no block (FlashAttention-2 does), so the causal run moves the same bytes.
With dropout, the loop is the paper's Algorithm 2: line 14 drops entries of P̃_ij with a
mask regenerated from the seed (`sim.algorithms.dropout`), never stored.
"""

from math import ceil

import numpy as np

from sim.algorithms.dropout import Dropout
from sim.algorithms.softmax import SoftmaxState, normalize
from sim.core.dtypes import ACCUMULATOR
from sim.machine import mask
from sim.machine.memory import Chip


def forward(chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None) -> None:
    """Read Q, K, V from HBM; write O (storage dtype) and the statistics ℓ, m (float32) to HBM."""
    Q = chip.hbm.tensors["Q"]
    N, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
    Tr, Tc = ceil(N / Br), ceil(Nk / Bc)  # lines 3–4: Q, O, ℓ, m in Tr blocks of Br rows; K, V in Tc of Bc
    chip.hbm.alloc("O", (N, d), Q.dtype)
    chip.hbm.alloc("ℓ", (N,), np.float32)
    chip.hbm.alloc("m", (N,), np.float32)

    for i in range(Tr):  # line 2, block by block: initialize O = 0, ℓ = 0, m = −∞ in HBM
        rows = (i * Br, min((i + 1) * Br, N))
        r = rows[1] - rows[0]
        with chip.step("init", 2, "Initialize O_i = 0, ℓ_i = 0, m_i = −∞ in HBM", i=i):
            empty = SoftmaxState.empty(r, ACCUMULATOR)  # ℓ_i = 0, m_i = −∞: the identity of ⊕
            chip.store("O", chip.put("O_i", np.zeros((r, d))), rows)
            chip.store("ℓ", chip.put("ℓ_i", empty.ℓ), rows)
            chip.store("m", chip.put("m_i", empty.m), rows)
        chip.free("O_i", "ℓ_i", "m_i")

    for j in range(Tc):  # line 5
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        with chip.step("load", 6, "Load K_j, V_j from HBM to on-chip SRAM", j=j):
            K_j = chip.load("K_j", "K", cols)  # (Bc, d) SRAM
            V_j = chip.load("V_j", "V", cols)  # (Bc, d) SRAM

        for i in range(Tr):  # line 7
            rows = (i * Br, min((i + 1) * Br, N))
            with chip.step("load", 8, "Load Q_i, O_i, ℓ_i, m_i from HBM to on-chip SRAM", i, j):
                Q_i = chip.load("Q_i", "Q", rows)  # (Br, d) SRAM
                O_i = chip.load("O_i", "O", rows)  # (Br, d) SRAM
                ℓ_i = chip.load("ℓ_i", "ℓ", rows)  # (Br,) SRAM
                m_i = chip.load("m_i", "m", rows)  # (Br,) SRAM
            with chip.step("compute", 9, "On chip, compute S_ij = τ Q_i K_jᵀ", i, j):
                S_ij = scale * chip.matmul(Q_i, K_j.T)  # (Br, Bc)
                chip.elementwise(S_ij.size)  # τ·
                if causal:
                    S_ij = mask.hide(chip, S_ij, rows, cols, N, Nk)
                S_ij = chip.put("S_ij", S_ij)
            with chip.step(
                "compute", 10, "On chip, m̃_ij = rowmax(S_ij), P̃_ij = exp(S_ij − m̃_ij), ℓ̃_ij = rowsum(P̃_ij)", i, j
            ):
                block, P̃ = SoftmaxState.block(S_ij, exp=chip.exp)  # the block's own (m̃_ij, ℓ̃_ij)
                m̃_ij = chip.put("m̃_ij", block.m)  # (Br,)
                P̃_ij = chip.put("P̃_ij", P̃, replaces=["S_ij"])  # (Br, Bc)
                ℓ̃_ij = chip.put("ℓ̃_ij", block.ℓ)  # (Br,)
                chip.elementwise(3 * P̃_ij.size)  # rowmax, S_ij − m̃_ij, rowsum
            with chip.step(
                "compute",
                11,
                "On chip, m_i_new = max(m_i, m̃_ij), ℓ_i_new = e^(m_i − m_i_new)·ℓ_i + e^(m̃_ij − m_i_new)·ℓ̃_ij",
                i,
                j,
            ):
                new, α, β = SoftmaxState(m_i, ℓ_i).rescale(SoftmaxState(m̃_ij, ℓ̃_ij), exp=chip.exp)  # (m_i, ℓ_i) ⊕
                m_new = chip.put("m_i_new", new.m)
                α = chip.put("α_i", α)  # e^(m_i − m_i_new): rescales the old O_i, ℓ_i
                β = chip.put("β_i", β)  # e^(m̃_ij − m_i_new): rescales this block
                ℓ_new = chip.put("ℓ_i_new", new.ℓ)
                chip.elementwise(6 * len(ℓ_new))  # max, m_i − m_i_new, m̃_ij − m_i_new, α·ℓ_i, β·ℓ̃_ij, +
            if dropout is not None:
                with chip.step("compute", None, "Algorithm 2, line 14: on chip, P̃_ij ← dropout(P̃_ij)", i, j):
                    P̃_ij = chip.put("P̃_ij", P̃_ij * dropout.mask(rows, cols))  # (Br, Bc), in place
                    chip.elementwise(P̃_ij.size)  # ∘ Z_ij
            with chip.step(
                "store",
                12,
                "Write O_i ← diag(ℓ_i_new)⁻¹·(diag(ℓ_i)·e^(m_i − m_i_new)·O_i + e^(m̃_ij − m_i_new)·P̃_ij V_j) to HBM",
                i,
                j,
            ):
                unnormalized = (ℓ_i * α)[:, None] * O_i + β[:, None] * chip.matmul(P̃_ij, V_j)  # (Br, d)
                O_i = chip.put("O_i", normalize(unnormalized, ℓ_new))
                chip.elementwise(4 * O_i.size + len(ℓ_new))  # ℓ_i·α, ·O_i, β·(P̃_ij V_j), +, ÷ℓ_i_new
                chip.store("O", O_i, rows)
            with chip.step("store", 13, "Write ℓ_i ← ℓ_i_new, m_i ← m_i_new to HBM", i, j):
                chip.store("ℓ", ℓ_new, rows)
                chip.store("m", m_new, rows)
            chip.free("Q_i", "O_i", "ℓ_i", "m_i", "P̃_ij", "m̃_ij", "ℓ̃_ij", "m_i_new", "ℓ_i_new", "α_i", "β_i")
        chip.free("K_j", "V_j")
