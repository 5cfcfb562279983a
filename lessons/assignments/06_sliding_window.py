"""Assignment 6 — the FlashAttention-2 forward pass with a sliding window (Mistral, Gemma), skipping what it hides.

What to implement
    `forward(chip, *, Br, Bc, scale, window)`: FlashAttention-2's forward pass (Dao, 2023,
    Algorithm 1) on the simulator's HBM and SRAM, with a sliding window. HBM holds Q (N, d) and
    K, V (Nk, d) in a storage dtype; N and Nk may differ and need not be multiples of the blocks.
    Write O (N, d, Q's dtype) and the log-sum-exp L (N,, float32) to HBM, each once.
    `window` is (left, right), as FlashAttention's `window_size`: query r sees key c only if
        r + Nk − N − left ≤ c ≤ r + Nk − N + right,
    aligned bottom-right like the causal mask; a side of −1 is unbounded ((−1, 0) is causal).
    Mask the scores of the tiles the window's edges cross, and skip — do not load — every K/V
    block that no row of Q_i may see: with a window of w keys, Q_i reads about (w + Br)/Bc + 1
    blocks instead of Nk/Bc, so the pass moves O(N·w) bytes instead of O(N·Nk). A row that sees
    no key has O = 0 and L = −∞; a Q block none of whose rows sees a key is not loaded either.

The API you may use
    The chip's API as in assignment 2 (chip.hbm.tensors, chip.hbm.alloc, chip.load, chip.put,
    chip.store, chip.free, chip.matmul, chip.exp) and NumPy. If you are stuck: lesson 6 (which K/V
    blocks a masked Q block reads) and lesson 11 (a window's skipped tiles). Do not read the library's
    listing; the grader refuses imports of sim.algorithms, sim.api.entry and sim.api.reference while it
    runs your code, and its similarity report flags submissions close to the listing or to each other.

How it is graded
    In a separate process on a proxy chip, the grader keeping HBM, SRAM and the ledger:
    correctness of O and L against the float64 definition (explicit mask, `sim.api.reference_variants`)
    on fresh seeded random shapes and windows (one-sided, two-sided, unbounded sides, N < Nk,
    N > Nk, fp16/bf16/fp32); every buffer within the SRAM given; and the HBM bytes against
    FlashAttention-2's closed form with the window's block skipping (sim.machine.mask.Rule,
    sim.algorithms.iomodel_variants), tensor by tensor: full marks when they match, none at 1.5×
    the optimum in deviation.
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

How to check yourself
    flashsim grade --self-check 06_sliding_window.py
"""

import numpy as np

GRADING = {
    "title": "FlashAttention-2 forward, sliding window",
    "driver": "chip",
    "entry": "forward",
    "algorithm": "flash2",
    "window_argument": True,
    "outputs": {"O": "input", "L": "fp32"},
    "io_hint": "load Q_i once per outer iteration (not at all where no row of it sees a key), and only the K/V "
               "blocks inside its rows' windows",
}

# fmt: off
TESTS = [
    {"name": "window (8, 0), N = Nk", "visibility": "public", "points": 15, "check": "output",
     "N": [40, 80], "Nk": "N", "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "window": [8, 0]},
    {"name": "two-sided window, fp16", "visibility": "public", "points": 15, "check": "output",
     "N": [40, 80], "Nk": "N", "d": 16, "dtype": "fp16", "Br": 16, "Bc": 8, "window": [[3, 20], [1, 12]]},
    {"name": "IO, window (16, 0)", "visibility": "public", "points": 15, "check": "io",
     "N": [120, 160], "Nk": "N", "d": 16, "dtype": "fp16", "Br": 16, "Bc": 16, "window": [16, 0],
     "io_full": 1.0, "io_zero": 1.5},
    # BEGIN HIDDEN TESTS
    {"name": "unbounded left, N < Nk, bf16", "visibility": "hidden", "points": 10, "check": "output",
     "N": [10, 40], "Nk": [50, 100], "d": 16, "dtype": "bf16", "Br": 16, "Bc": 16, "window": [-1, [0, 6]]},
    {"name": "N > Nk: rows that see no key", "visibility": "hidden", "points": 10, "check": "output",
     "N": [60, 100], "Nk": [10, 40], "d": 8, "dtype": "fp32", "Br": 16, "Bc": 8, "window": [[0, 10], 0]},
    {"name": "unbounded right", "visibility": "hidden", "points": 5, "check": "output",
     "N": [30, 60], "Nk": [30, 60], "d": 8, "dtype": "fp32", "Br": 8, "Bc": 16, "window": [[2, 9], -1]},
    {"name": "SRAM budget, no slack", "visibility": "hidden", "points": 5, "check": "output",
     "N": [40, 80], "Nk": [40, 80], "d": 16, "dtype": "fp16", "Br": 16, "Bc": 16, "window": [12, 4],
     "sram_slack": 1.0},
    {"name": "IO, two-sided, N ≠ Nk", "visibility": "hidden", "points": 25, "check": "io",
     "N": [100, 140], "Nk": [120, 180], "d": 8, "dtype": "bf16", "Br": 16, "Bc": 8, "window": [[10, 30], [0, 10]],
     "io_full": 1.0, "io_zero": 1.5},
    # END HIDDEN TESTS
]
# fmt: on


def forward(chip, *, Br: int, Bc: int, scale: float, window) -> None:
    """FlashAttention-2 with a sliding window: read Q once and only the K/V blocks the window shows each Q block."""
    # BEGIN SOLUTION: the first and last key a block's rows see bound the K/V blocks to load; mask the edges
    N, d = chip.hbm.tensors["Q"].shape
    Nk = chip.hbm.tensors["K"].shape[0]
    left, right = (np.inf if w == -1 else w for w in window)
    chip.hbm.alloc("O", (N, d), chip.hbm.tensors["Q"].dtype)
    chip.hbm.alloc("L", (N,), np.float32)
    for i in range(-(-N // Br)):  # line 3
        r0, r1 = i * Br, min((i + 1) * Br, N)
        first = r0 + Nk - N - left  # the first key the block's first row sees
        last = r1 - 1 + Nk - N + right  # the last key its last row sees
        if last < 0 or first > Nk - 1:  # no row of Q_i sees a key: never loaded; O_i = 0, L_i = −∞
            chip.store("O", chip.put("O_i", np.zeros((r1 - r0, d))), (r0, r1))
            chip.store("L", chip.put("L_i", np.full(r1 - r0, -np.inf)), (r0, r1))
            chip.free("O_i", "L_i")
            continue
        Q_i = chip.load("Q_i", "Q", (r0, r1))  # line 4: (Br, d) SRAM
        O_i = chip.put("O_i", np.zeros((r1 - r0, d)))  # line 5
        ℓ_i = chip.put("ℓ_i", np.zeros(r1 - r0))
        m_i = chip.put("m_i", np.full(r1 - r0, -np.inf))
        rows = np.arange(r0, r1)[:, None] + Nk - N  # each row's diagonal key
        for j in range(-(-Nk // Bc)):  # line 6
            c0, c1 = j * Bc, min((j + 1) * Bc, Nk)
            if c1 - 1 < first or c0 > last:
                continue  # no row of Q_i sees this block: never loaded
            K_j = chip.load("K_j", "K", (c0, c1))  # line 7
            V_j = chip.load("V_j", "V", (c0, c1))
            S = scale * chip.matmul(Q_i, K_j.T)  # line 8: (Br, Bc)
            cols = np.arange(c0, c1)[None, :]
            S = chip.put("S_ij", np.where((cols >= rows - left) & (cols <= rows + right), S, -np.inf))
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
