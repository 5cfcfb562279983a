"""Assignment 3 — the FlashAttention-2 forward pass with causal block skipping, for N ≠ Nk.

What to implement
    `forward(chip, *, Br, Bc, scale, causal)`: FlashAttention-2's forward pass (Dao, 2023,
    Algorithm 1) on the simulator's HBM and SRAM. HBM holds Q (N, d) and K, V (Nk, d) in a storage
    dtype; N and Nk may differ and need not be multiples of the blocks. Write O (N, d, Q's dtype)
    and the log-sum-exp L (N,, float32) to HBM, each once. The outer loop runs over Q blocks (Br
    rows): load Q_i once, keep O_i, ℓ_i, m_i on chip while K_j, V_j (Bc rows) stream through,
    rescale O_i once at the end, L_i = m_i + log ℓ_i.
    With `causal`, query r sees key c only if c ≤ r + Nk − N (the mask aligned bottom-right, as in
    FlashAttention ≥ 2.1): mask the scores of the tiles that cross that line, and skip — do not
    load — the K/V blocks that no row of Q_i may see. A row that sees no key at all (N > Nk) has
    O = 0 and L = −∞; a Q block none of whose rows sees a key is not loaded either
    (FlashAttention-2's kernel exits early there).

The API you may use
    The chip's API as in assignment 2 (chip.hbm.tensors, chip.hbm.alloc, chip.load, chip.put,
    chip.store, chip.free, chip.matmul, chip.exp) and NumPy. If you are stuck: lesson 6 (which K/V
    blocks a causal Q block reads, with hints in steps) and lesson 5 (the loop order). Do not read the
    library's listing; the grader refuses imports of sim.algorithms, sim.api.entry and sim.api.reference while it
    runs your code, and its similarity report flags submissions close to the listing or to each other.

How it is graded
    In a separate process on a proxy chip, the grader keeping HBM, SRAM and the ledger:
    correctness of O and L against float64 on fresh seeded random shapes (causal or not, N < Nk,
    N > Nk, fp16/bf16/fp32, large logits); every buffer within the SRAM given; at a large shape,
    your process's memory far below one N × Nk matrix; and the HBM bytes against FlashAttention-2's
    closed form with causal block skipping (sim.machine.iomodel.flash2), tensor by tensor: full marks when
    they match, none at 1.5× the optimum in deviation.
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

How to check yourself
    flashsim grade --self-check 03_flash2_causal.py
"""

import numpy as np

GRADING = {
    "title": "FlashAttention-2 forward, causal",
    "driver": "chip",
    "entry": "forward",
    "algorithm": "flash2",
    "causal_argument": True,
    "outputs": {"O": "input", "L": "fp32"},
    "io_hint": "load Q_i once per outer iteration (not at all where no row of it sees a key), and skip the K/V "
               "blocks no row of Q_i may see",
}

TESTS = [
    {"name": "not causal, ragged", "visibility": "public", "points": 10, "check": "output",
     "N": [20, 70], "Nk": "N", "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16},
    {"name": "causal, N = Nk, fp16", "visibility": "public", "points": 15, "check": "output",
     "N": [40, 90], "Nk": "N", "d": 16, "dtype": "fp16", "Br": 16, "Bc": 16, "causal": True},
    {"name": "IO, causal", "visibility": "public", "points": 15, "check": "io",
     "N": [100, 140], "Nk": "N", "d": 16, "dtype": "fp16", "Br": 16, "Bc": 16, "causal": True,
     "io_full": 1.0, "io_zero": 1.5},
    # BEGIN HIDDEN TESTS
    {"name": "causal, N < Nk, bf16", "visibility": "hidden", "points": 10, "check": "output",
     "N": [10, 40], "Nk": [50, 100], "d": 16, "dtype": "bf16", "Br": 16, "Bc": 16, "causal": True},
    {"name": "causal, N > Nk: rows that see no key", "visibility": "hidden", "points": 10, "check": "output",
     "N": [60, 100], "Nk": [10, 40], "d": 8, "dtype": "fp32", "Br": 16, "Bc": 8, "causal": True},
    {"name": "causal, logits in the hundreds", "visibility": "hidden", "points": 10, "check": "output",
     "N": [30, 60], "Nk": [30, 60], "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "causal": True, "logit_scale": 8.0},
    {"name": "SRAM budget, no slack", "visibility": "hidden", "points": 5, "check": "output",
     "N": [40, 80], "Nk": [40, 80], "d": 16, "dtype": "fp16", "Br": 16, "Bc": 16, "causal": True, "sram_slack": 1.0},
    {"name": "IO, causal, N > Nk", "visibility": "hidden", "points": 10, "check": "io",
     "N": [100, 140], "Nk": [60, 90], "d": 8, "dtype": "bf16", "Br": 16, "Bc": 16, "causal": True,
     "io_full": 1.0, "io_zero": 1.5},
    {"name": "no N × Nk matrix", "visibility": "hidden", "points": 15, "check": "memory",
     "N": 1024, "Nk": 1024, "d": 16, "dtype": "fp16", "Br": 128, "Bc": 128, "causal": True},
    # END HIDDEN TESTS
]


def forward(chip, *, Br: int, Bc: int, scale: float, causal: bool) -> None:
    """FlashAttention-2: read Q, K, V; write O (Q's dtype) and L = log-sum-exp (float32), each once."""
    # BEGIN SOLUTION: outer loop over Q blocks; stop the inner loop at the last K/V block row r1 − 1 may see
    N, d = chip.hbm.tensors["Q"].shape
    Nk = chip.hbm.tensors["K"].shape[0]
    chip.hbm.alloc("O", (N, d), chip.hbm.tensors["Q"].dtype)
    chip.hbm.alloc("L", (N,), np.float32)
    for i in range(-(-N // Br)):  # line 3
        r0, r1 = i * Br, min((i + 1) * Br, N)
        last_key = r1 - 1 + Nk - N if causal else Nk - 1  # the last key any row of this block sees
        if last_key < 0:  # no row of Q_i sees a key (N > Nk): never loaded; O_i = 0, L_i = −∞ (FA2 exits early)
            chip.store("O", chip.put("O_i", np.zeros((r1 - r0, d))), (r0, r1))
            chip.store("L", chip.put("L_i", np.full(r1 - r0, -np.inf)), (r0, r1))
            chip.free("O_i", "L_i")
            continue
        Q_i = chip.load("Q_i", "Q", (r0, r1))  # line 4: (Br, d) SRAM
        O_i = chip.put("O_i", np.zeros((r1 - r0, d)))  # line 5
        ℓ_i = chip.put("ℓ_i", np.zeros(r1 - r0))
        m_i = chip.put("m_i", np.full(r1 - r0, -np.inf))
        for j in range(-(-Nk // Bc)):  # line 6
            c0, c1 = j * Bc, min((j + 1) * Bc, Nk)
            if c0 > last_key:
                break  # this block and every later one are hidden from all of Q_i: never loaded
            K_j = chip.load("K_j", "K", (c0, c1))  # line 7
            V_j = chip.load("V_j", "V", (c0, c1))
            S = scale * chip.matmul(Q_i, K_j.T)  # line 8: (Br, Bc)
            if causal and c1 - 1 > r0 + Nk - N:  # the tile crosses the diagonal
                S = np.where(np.arange(c0, c1)[None, :] <= np.arange(r0, r1)[:, None] + Nk - N, S, -np.inf)
            S = chip.put("S_ij", S)
            m_new = chip.put("m_new", np.maximum(m_i, S.max(axis=1)))  # line 9
            shift = np.where(np.isneginf(m_new), 0.0, m_new)
            P = chip.put("P̃_ij", np.exp(S - shift[:, None]), replaces=["S_ij"])
            α = chip.put("α_i", np.exp(m_i - shift))
            ℓ_i = chip.put("ℓ_i", α * ℓ_i + P.sum(axis=1))
            O_i = chip.put("O_i", α[:, None] * O_i + chip.matmul(P, V_j))  # line 10
            m_i = chip.put("m_i", m_new, replaces=["m_new"])
            chip.free("K_j", "V_j", "P̃_ij", "α_i")
        seen = ℓ_i > 0
        O_i = chip.put("O_i", np.where(seen[:, None], O_i / np.where(seen, ℓ_i, 1.0)[:, None], 0.0))  # line 12
        L_i = chip.put("L_i", np.where(seen, m_i + np.log(np.where(seen, ℓ_i, 1.0)), -np.inf))  # line 13
        chip.store("O", O_i, (r0, r1))  # line 14
        chip.store("L", L_i, (r0, r1))  # line 15
        chip.free("Q_i", "O_i", "ℓ_i", "m_i", "L_i")
    # END SOLUTION
