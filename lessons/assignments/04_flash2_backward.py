"""Assignment 4 — the backward pass, recomputing P from the saved log-sum-exp.

What to implement
    `backward(chip, *, Br, Bc, scale, causal)`: FlashAttention-2's backward pass (Dao, 2023,
    Algorithm 2) on the simulator's HBM and SRAM. HBM holds the forward pass's inputs Q (N, d),
    K, V (Nk, d), its output O (N, d), the upstream gradient dO (N, d), all in one storage dtype,
    and the log-sum-exp L (N,, float32). Write dQ (N, d), dK and dV (Nk, d) in that dtype.
    Never store P: rebuild each tile P_ij = exp(τ Q_i K_jᵀ − L_i) on chip.
    1. Pre-pass, per Q block i: write dQ_i = 0; load O_i, dO_i; write D_i = rowsum(dO_i ∘ O_i) to an
       HBM tensor named "D" (N,, float32).
    2. Per K/V block j (outer loop): load K_j, V_j; keep dK_j, dV_j on chip; per Q block i (inner
       loop) load Q_i, dO_i, L_i, D_i, rebuild S_ij and P_ij (masked where `causal` hides a key:
       c ≤ r + Nk − N, bottom-right), dV_j += P_ijᵀ dO_i, dP_ij = dO_i V_jᵀ, dS_ij = P_ij ∘ (dP_ij − D_i),
       then load dQ_i, add τ dS_ij K_j and write it back, and dK_j += τ dS_ijᵀ Q_i. With `causal`,
       skip (do not load) the Q blocks none of whose rows sees a key of block j. Write dK_j, dV_j once.

The API you may use
    The chip's API as in assignments 2 and 3, and NumPy. If you are stuck: lesson 7 (the gradients,
    P_ij rebuilt from L_i, the backward's bytes, with hints in steps). Do not read the library's
    listing; the grader refuses imports of sim.algorithms, sim.api.entry and sim.api.reference while it runs
    your code, and its similarity report flags submissions close to the listing or to each other.

How it is graded
    In a separate process on a proxy chip, the grader keeping HBM, SRAM and the ledger: dQ, dK, dV
    against the float64 gradient (1e-5 of its largest entry: fp32 storage; the listing rounds dQ at
    every write-back, so fp16/bf16 storage is not graded here) on fresh seeded random shapes, causal
    or not, N ≠ Nk; every buffer within the SRAM given; at a large shape your process's memory far
    below one N × Nk matrix; the HBM bytes against FlashAttention-2's backward closed form
    (sim.algorithms.registry.backward_counts), tensor by tensor, full marks when they match, none at 1.5×.
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

How to check yourself
    flashsim grade --self-check 04_flash2_backward.py
"""

import numpy as np

GRADING = {
    "title": "FlashAttention-2 backward",
    "driver": "chip",
    "entry": "backward",
    "algorithm": "flash2",
    "pass": "backward",
    "causal_argument": True,
    "outputs": {"dQ": "input", "dK": "input", "dV": "input"},
    "io_hint": "load K_j, V_j once, in the outer loop, and skip the Q blocks the causal mask hides",
}

TESTS = [
    {"name": "not causal", "visibility": "public", "points": 15, "check": "output",
     "N": [16, 48], "Nk": "N", "d": 8, "dtype": "fp32", "Br": 8, "Bc": 16},
    {"name": "causal, ragged", "visibility": "public", "points": 15, "check": "output",
     "N": [30, 60], "Nk": "N", "d": 8, "dtype": "fp32", "Br": 16, "Bc": 8, "causal": True},
    {"name": "IO, causal", "visibility": "public", "points": 15, "check": "io",
     "N": [60, 90], "Nk": "N", "d": 8, "dtype": "fp32", "Br": 16, "Bc": 16, "causal": True,
     "io_full": 1.0, "io_zero": 1.5},
    # BEGIN HIDDEN TESTS
    {"name": "causal, N < Nk", "visibility": "hidden", "points": 10, "check": "output",
     "N": [10, 30], "Nk": [40, 70], "d": 8, "dtype": "fp32", "Br": 8, "Bc": 16, "causal": True},
    {"name": "causal, N > Nk: rows that see no key", "visibility": "hidden", "points": 10, "check": "output",
     "N": [40, 70], "Nk": [10, 30], "d": 8, "dtype": "fp32", "Br": 16, "Bc": 8, "causal": True},
    {"name": "larger logits", "visibility": "hidden", "points": 10, "check": "output",
     "N": [20, 50], "Nk": [20, 50], "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "logit_scale": 3.0},
    {"name": "IO, causal, N > Nk", "visibility": "hidden", "points": 10, "check": "io",
     "N": [80, 110], "Nk": [40, 60], "d": 8, "dtype": "fp32", "Br": 16, "Bc": 16, "causal": True,
     "io_full": 1.0, "io_zero": 1.5},
    {"name": "no N × Nk matrix", "visibility": "hidden", "points": 15, "check": "memory",
     "N": 1024, "Nk": 1024, "d": 8, "dtype": "fp32", "Br": 64, "Bc": 64},
    # END HIDDEN TESTS
]


def backward(chip, *, Br: int, Bc: int, scale: float, causal: bool) -> None:
    """FlashAttention-2's backward: read Q, K, V, O, dO, L; write D (float32) and dQ, dK, dV."""
    # BEGIN SOLUTION: the pre-pass writes dQ = 0 and D; then K/V blocks outside, Q blocks inside
    N, d = chip.hbm.tensors["Q"].shape
    Nk = chip.hbm.tensors["K"].shape[0]
    dtype = chip.hbm.tensors["Q"].dtype
    for name, rows in (("dQ", N), ("dK", Nk), ("dV", Nk)):
        chip.hbm.alloc(name, (rows, d), dtype)
    chip.hbm.alloc("D", (N,), np.float32)
    Tr, Tc = -(-N // Br), -(-Nk // Bc)
    for i in range(Tr):  # lines 3–4: the pre-pass
        rows = (i * Br, min((i + 1) * Br, N))
        chip.store("dQ", chip.put("zero", np.zeros((rows[1] - rows[0], d))), rows)
        chip.free("zero")
        O_i, dO_i = chip.load("O_i", "O", rows), chip.load("dO_i", "dO", rows)
        chip.store("D", chip.put("D_i", (dO_i * O_i).sum(axis=1)), rows)
        chip.free("O_i", "dO_i", "D_i")
    for j in range(Tc):  # line 5
        c0, c1 = j * Bc, min((j + 1) * Bc, Nk)
        K_j, V_j = chip.load("K_j", "K", (c0, c1)), chip.load("V_j", "V", (c0, c1))  # line 6
        dK_j = chip.put("dK_j", np.zeros((c1 - c0, d)))  # line 7
        dV_j = chip.put("dV_j", np.zeros((c1 - c0, d)))
        for i in range(Tr):  # line 8
            r0, r1 = i * Br, min((i + 1) * Br, N)
            if causal and c0 > r1 - 1 + Nk - N:
                continue  # no row of Q_i sees any key of K_j: skipped, never loaded
            Q_i, dO_i = chip.load("Q_i", "Q", (r0, r1)), chip.load("dO_i", "dO", (r0, r1))  # line 9
            L_i, D_i = chip.load("L_i", "L", (r0, r1)), chip.load("D_i", "D", (r0, r1))
            S = scale * chip.matmul(Q_i, K_j.T)  # line 10: (Br, Bc)
            if causal:
                S = np.where(np.arange(c0, c1)[None, :] <= np.arange(r0, r1)[:, None] + Nk - N, S, -np.inf)
            S = chip.put("S_ij", S)
            P = chip.put("P_ij", np.exp(S - np.where(np.isneginf(L_i), 0.0, L_i)[:, None]), replaces=["S_ij"])  # line 11
            dV_j = chip.put("dV_j", dV_j + chip.matmul(P.T, dO_i))  # line 12
            dP = chip.put("dP_ij", chip.matmul(dO_i, V_j.T))  # line 13
            dS = chip.put("dS_ij", P * (dP - D_i[:, None]), replaces=["dP_ij"])  # line 14
            chip.free("P_ij")
            dQ_i = chip.load("dQ_i", "dQ", (r0, r1))  # line 15
            chip.store("dQ", chip.put("dQ_i", dQ_i + scale * chip.matmul(dS, K_j)), (r0, r1))
            dK_j = chip.put("dK_j", dK_j + scale * chip.matmul(dS.T, Q_i))  # line 16
            chip.free("Q_i", "dO_i", "L_i", "D_i", "dS_ij", "dQ_i")
        chip.store("dK", dK_j, (c0, c1))  # line 18
        chip.store("dV", dV_j, (c0, c1))
        chip.free("K_j", "V_j", "dK_j", "dV_j")
    # END SOLUTION
