"""Red team 109: S kept whole in an output's name (O allocated N × Nk), then O allocated again as it must be: the HBM
check read what was left at the end."""

import numpy as np


def forward(chip, *, Br, Bc, scale):
    """Standard (non-flash) attention: S = QKᵀ written WHOLE to HBM, read back for the softmax.
    S lives in HBM under the output's name "O" (shape N × Nk, fp32); at the end "O" is
    allocated again with its real shape, which replaces (drops) S before the grader looks."""
    N, d = chip.hbm.tensors["Q"].shape
    Nk = chip.hbm.tensors["K"].shape[0]
    dt = chip.hbm.tensors["Q"].dtype
    Tr, Tc = -(-N // Br), -(-Nk // Bc)
    chip.hbm.alloc("O", (N, Nk), np.float32)  # scratch: the whole S
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        Q_i = chip.load("Q_i", "Q", rows)
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            K_j = chip.load("K_j", "K", cols)
            S = chip.put("S", scale * chip.matmul(Q_i, K_j.T))
            chip.store("O", S, rows, cols)
            chip.free("K_j", "S")
        chip.free("Q_i")
    # pass 2: row max and row sum from S in HBM
    m_all, l_all = {}, {}
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        m = np.full(rows[1] - rows[0], -np.inf, np.float32)
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            S = chip.load("S", "O", rows, cols)
            m = np.maximum(m, S.max(axis=1))
            chip.free("S")
        l = np.zeros_like(m)
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            S = chip.load("S", "O", rows, cols)
            l += np.exp(S - m[:, None]).sum(axis=1)
            chip.free("S")
        m_all[i], l_all[i] = m, l
    # pass 3: O = softmax(S) V, reading S from HBM; kept in SRAM row block by row block
    outs = {}
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        acc = np.zeros((rows[1] - rows[0], d), np.float32)
        for j in range(Tc):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            S = chip.load("S", "O", rows, cols)
            V_j = chip.load("V_j", "V", cols)
            P = chip.put("P", np.exp(S - m_all[i][:, None]), replaces=["S"])
            acc += chip.matmul(P, V_j)
            chip.free("P", "V_j")
        outs[i] = acc / l_all[i][:, None]
    # drop S: "O" allocated again with its real shape; the old N × Nk tensor is gone
    chip.hbm.alloc("O", (N, d), dt)
    chip.hbm.alloc("ℓ", (N,), np.float32)
    chip.hbm.alloc("m", (N,), np.float32)
    for i in range(Tr):
        rows = (i * Br, min((i + 1) * Br, N))
        chip.store("O", chip.put("o", outs[i]), rows)
        chip.store("ℓ", chip.put("l", l_all[i]), rows)
        chip.store("m", chip.put("mm", m_all[i]), rows)
        chip.free("o", "l", "mm")
