"""Correct output, FlashAttention-2's loop order: Q blocks outside, so K and V are read Tr times."""

import numpy as np


def forward(chip, *, Br, Bc, scale):
    N, d = chip.hbm.tensors["Q"].shape
    Nk = chip.hbm.tensors["K"].shape[0]
    chip.hbm.alloc("O", (N, d), chip.hbm.tensors["Q"].dtype)
    chip.hbm.alloc("ℓ", (N,), np.float32)
    chip.hbm.alloc("m", (N,), np.float32)
    for i in range(-(-N // Br)):
        rows = (i * Br, min((i + 1) * Br, N))
        Q_i = chip.load("Q_i", "Q", rows)
        r = rows[1] - rows[0]
        O_i, ℓ_i, m_i = (
            chip.put("O_i", np.zeros((r, d))),
            chip.put("ℓ_i", np.zeros(r)),
            chip.put("m_i", np.full(r, -np.inf)),
        )
        for j in range(-(-Nk // Bc)):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            K_j, V_j = chip.load("K_j", "K", cols), chip.load("V_j", "V", cols)
            S = chip.put("S", scale * chip.matmul(Q_i, K_j.T))
            m_new = chip.put("m_new", np.maximum(m_i, S.max(axis=1)))
            P = chip.put("P", np.exp(S - m_new[:, None]), replaces=["S"])
            α = chip.put("α", np.exp(m_i - m_new))
            ℓ_i = chip.put("ℓ_i", α * ℓ_i + P.sum(axis=1))
            O_i = chip.put("O_i", α[:, None] * O_i + chip.matmul(P, V_j))
            m_i = chip.put("m_i", m_new, replaces=["m_new"])
            chip.free("K_j", "V_j", "P", "α")
        O_i = chip.put("O_i", O_i / ℓ_i[:, None])
        chip.store("O", O_i, rows)
        chip.store("ℓ", ℓ_i, rows)
        chip.store("m", m_i, rows)
        chip.free("Q_i", "O_i", "ℓ_i", "m_i")
