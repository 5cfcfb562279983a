"""FlashAttention-2 forward (Dao, 2023, Algorithm 1): outer loop over Q blocks, one rescale at the end.

Each Q block i is read once (not at all where it sees no key); K and V stream through SRAM once
per Q block; O_i and the log-sum-exp L_i are written once. HBM traffic: s·(Nd + Tr·2·Nk·d) read, s·Nd + 4N written.
With dropout, P̃_ij is dropped as in FlashAttention's Algorithm 2 (line 14), with a mask
regenerated from the seed (`sim.algorithms.dropout`), never stored; ℓ_i sums P̃_ij before dropout.
"""

from math import ceil

import numpy as np

from sim.algorithms.dropout import Dropout
from sim.algorithms.scores import Scores, plain
from sim.algorithms.softmax import SoftmaxState, normalize
from sim.core.dtypes import ACCUMULATOR
from sim.machine.memory import Chip


def forward(
    chip: Chip, *, Br: int, Bc: int, scale: float, causal: bool, dropout: Dropout | None = None,
    scores: Scores | None = None,
) -> None:  # fmt: skip
    """Read Q, K, V from HBM; write O (storage dtype) and L = logsumexp (float32) to HBM.

    `scores` adds a window, ALiBi or a softcap to S_ij (`sim.algorithms.scores`; None: the causal mask alone).
    """
    Q = chip.hbm.tensors["Q"]
    N, d = Q.shape
    Nk = chip.hbm.tensors["K"].shape[0]
    scores = scores or plain(N, Nk, causal)
    Tr, Tc = ceil(N / Br), ceil(Nk / Bc)  # line 1: Q in Tr blocks of Br rows; K, V in Tc blocks of Bc rows
    chip.hbm.alloc("O", (N, d), Q.dtype)  # line 2: O in Tr blocks of Br rows, L in Tr blocks of Br entries
    chip.hbm.alloc("L", (N,), np.float32)

    for i in range(Tr):  # line 3
        rows = (i * Br, min((i + 1) * Br, N))
        r = rows[1] - rows[0]
        blind = not scores.rule.seen_blocks(rows, Bc)  # N > Nk: no row of Q_i sees a key (FA2's kernel exits early)
        if blind:
            with chip.step("skip", 4, f"Skip Q_i: the {scores.hiding} hides every key from it; O_i = 0, L_i = −∞", i=i):
                pass  # never read from HBM
        else:
            with chip.step("load", 4, "Load Q_i from HBM to on-chip SRAM", i=i):
                Q_i = chip.load("Q_i", "Q", rows)  # (Br, d) SRAM
        with chip.step("init", 5, "On chip, initialize O_i = 0, ℓ_i = 0, m_i = −∞", i=i):
            O_i = chip.put("O_i", np.zeros((r, d)))  # (Br, d) SRAM, float32 accumulator
            empty = SoftmaxState.empty(r, ACCUMULATOR)  # the identity of ⊕
            ℓ_i = chip.put("ℓ_i", empty.ℓ)  # (Br,) SRAM
            m_i = chip.put("m_i", empty.m)  # (Br,) SRAM

        for j in range(Tc):  # line 6
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            if not scores.rule.block_seen(rows, cols):
                with chip.step("skip", 6, f"Skip K_j, V_j: the {scores.hiding} hides them from every row of Q_i", i, j):
                    chip.ledger.work["skipped"] += 1  # a tile never computed
                    continue  # never read from HBM: this is FlashAttention-2's causal (and window) saving
            with chip.step("load", 7, "Load K_j, V_j from HBM to on-chip SRAM", i, j):
                K_j = chip.load("K_j", "K", cols)  # (Bc, d) SRAM
                V_j = chip.load("V_j", "V", cols)  # (Bc, d) SRAM
            with chip.step("compute", 8, f"On chip, compute S_ij = τ Q_i K_jᵀ{scores.lines}", i, j):
                S_ij = scale * chip.matmul(Q_i, K_j.T)  # (Br, Bc)
                chip.elementwise(S_ij.size)  # τ·
                S_ij, _ = scores.apply(chip, S_ij, rows, cols)
                S_ij = chip.put("S_ij", S_ij)
            with chip.step(
                "compute",
                9,
                "On chip, m_i ← max(m_i, rowmax(S_ij)), P̃_ij = exp(S_ij − m_i), ℓ_i ← e^(m_old − m_i)·ℓ_i + rowsum(P̃_ij)",
                i,
                j,
            ):
                new, P̃, α = SoftmaxState(m_i, ℓ_i).extend(S_ij, exp=chip.exp)  # the online update
                m_new = chip.put("m_new", new.m)  # (Br,)
                P̃_ij = chip.put("P̃_ij", P̃, replaces=["S_ij"])  # (Br, Bc)
                α = chip.put("α_i", α)  # (Br,) = e^(m_old − m_new)
                ℓ_i = chip.put("ℓ_i", new.ℓ)
                m_i = chip.put("m_i", m_new, replaces=["m_new"])
                chip.elementwise(3 * P̃_ij.size + 4 * r)  # rowmax, S_ij − m_i, rowsum; per row: max, −, α·ℓ_i, +
            if dropout is not None:
                with chip.step("compute", None, "As FA1's Algorithm 2, line 14: P̃_ij ← dropout(P̃_ij)", i, j):
                    P̃_ij = chip.put("P̃_ij", P̃_ij * dropout.mask(rows, cols))  # (Br, Bc), in place
                    chip.elementwise(P̃_ij.size)  # ∘ Z_ij
            with chip.step("compute", 10, "On chip, O_i ← diag(e^(m_old − m_i))·O_i + P̃_ij V_j", i, j):
                O_i = chip.put("O_i", α[:, None] * O_i + chip.matmul(P̃_ij, V_j))  # (Br, d)
                chip.elementwise(O_i.size)  # α·O_i (adding P̃_ij V_j is the matmul's accumulate)
            chip.free("P̃_ij", "α_i")
        chip.free("K_j", "V_j")

        with chip.step("compute", 12, "On chip, O_i = diag(ℓ_i)⁻¹ O_i", i=i):
            O_i = chip.put("O_i", normalize(O_i, ℓ_i))
            chip.elementwise(O_i.size)  # ÷ℓ_i
        with chip.step("compute", 13, "On chip, L_i = m_i + log(ℓ_i)", i=i):
            L_i = chip.put("L_i", SoftmaxState(m_i, ℓ_i).lse)  # (Br,); −∞ for a row that sees no key
            chip.elementwise(2 * r)  # log, +
        with chip.step("store", 14, "Write O_i to HBM as the i-th block of O", i=i):
            chip.store("O", O_i, rows)
        with chip.step("store", 15, "Write L_i to HBM as the i-th block of L", i=i):
            chip.store("L", L_i, rows)
        chip.free(*(() if blind else ("Q_i",)), "O_i", "ℓ_i", "m_i", "L_i")
