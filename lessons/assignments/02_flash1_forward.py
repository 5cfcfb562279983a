"""Assignment 2 — the FlashAttention forward pass, Algorithm 1, on the simulator's HBM and SRAM.

What to implement
    `forward(chip, *, Br, Bc, scale)`: the forward pass of the FlashAttention paper's Algorithm 1
    (Dao et al., 2022), followed literally. HBM holds Q (N, d) and K, V (Nk, d) in a storage dtype
    (fp16, bf16 or fp32). Write O (N, d, Q's dtype) and the statistics ℓ and m (N,, float32) to HBM:
    initialize O = 0, ℓ = 0, m = −∞ in HBM (line 2); then for each K/V block j (outer loop) load
    K_j, V_j, and for each Q block i (inner loop) load Q_i, O_i, ℓ_i, m_i, compute S_ij = τ Q_i K_jᵀ,
    m̃_ij, P̃_ij, ℓ̃_ij, the new m_i and ℓ_i, and write O_i, ℓ_i, m_i back (lines 5–13). Blocks have
    Br query rows and Bc key rows (the last ones may be ragged: N and Nk need not be multiples);
    τ = `scale`.

The API you may use
    chip.hbm.tensors["Q"].shape / .dtype          shapes and storage dtypes (no values: load tiles)
    chip.hbm.alloc(name, shape, dtype)            reserve an output in HBM
    chip.load(buf, tensor, rows, cols=None)       HBM → SRAM: a float32 copy of the tile rows = (start, stop)
    chip.put(buf, value, replaces=())             keep an on-chip result in SRAM (replacing `replaces`)
    chip.store(tensor, value, rows, cols=None)    SRAM → HBM (value must be an SRAM buffer)
    chip.free(*bufs)                              release SRAM buffers
    chip.matmul(A, B), chip.exp(x)                arithmetic on SRAM buffers; NumPy for the rest
    If you are stuck: lesson 4 runs Algorithm 1 step by step on a 4 × 4 example and its exercises
    build lines 10–12 with hints in steps (`hint(1)`, `hint(2)`, …); lesson 5 counts its bytes. The
    library's own listing is the answer, not a help: do not read it. The grader refuses imports of the
    library's listings (sim.algorithms, sim.api.entry, sim.api.reference) while it runs your code, and its
    similarity report shows your instructor any submission close to that listing or to another one.

How it is graded
    Your function runs in a separate process on a proxy chip: the grader keeps HBM, SRAM and the byte
    ledger in its own process, so the bytes it scores are the ones it served and received.
    - correctness: O, ℓ and m against a float64 reference on fresh random shapes every run (ragged
      N, N ≠ Nk, fp16/bf16/fp32, logits in the hundreds), seeded; the report gives the seed;
    - memory: every buffer you load or put must fit in the SRAM the test gives (a load or put that
      does not fit fails the test), and at a large shape the memory your process uses must stay far
      below one N × Nk matrix;
    - IO: the HBM bytes are compared with Algorithm 1's closed form (sim.machine.iomodel.flash1) tensor by
      tensor: full marks when they match, none at 1.5× the optimum's bytes in deviation.
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

How to check yourself
    flashsim grade --self-check 02_flash1_forward.py
"""

import numpy as np

GRADING = {
    "title": "FlashAttention forward, Algorithm 1",
    "driver": "chip",
    "entry": "forward",
    "algorithm": "flash1",
    "outputs": {"O": "input", "ℓ": "fp32", "m": "fp32"},
    "io_hint": "check your loop order: Algorithm 1 loads K_j, V_j once, in the outer loop",
}

TESTS = [
    {"name": "one block", "visibility": "public", "points": 10, "check": "output",
     "N": [4, 16], "Nk": "N", "d": 8, "dtype": "fp32", "Br": 16, "Bc": 16},
    {"name": "ragged blocks, fp16", "visibility": "public", "points": 15, "check": "output",
     "N": [33, 70], "Nk": "N", "d": 16, "dtype": "fp16", "Br": 16, "Bc": 16},
    {"name": "IO against Algorithm 1", "visibility": "public", "points": 15, "check": "io",
     "N": [100, 140], "Nk": "N", "d": 16, "dtype": "fp16", "Br": 16, "Bc": 64, "io_full": 1.0, "io_zero": 1.5},
    # BEGIN HIDDEN TESTS
    {"name": "N ≠ Nk, bf16", "visibility": "hidden", "points": 10, "check": "output",
     "N": [20, 60], "Nk": [61, 120], "d": 16, "dtype": "bf16", "Br": 16, "Bc": 32},
    {"name": "logits in the hundreds", "visibility": "hidden", "points": 10, "check": "output",
     "N": [30, 50], "Nk": [30, 50], "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "logit_scale": 8.0},
    {"name": "SRAM budget, no slack", "visibility": "hidden", "points": 10, "check": "output",
     "N": [40, 80], "Nk": [40, 80], "d": 16, "dtype": "fp16", "Br": 16, "Bc": 16, "sram_slack": 1.0},
    {"name": "IO, N ≠ Nk", "visibility": "hidden", "points": 15, "check": "io",
     "N": [100, 140], "Nk": [150, 200], "d": 8, "dtype": "bf16", "Br": 16, "Bc": 64, "io_full": 1.0, "io_zero": 1.5},
    {"name": "no N × Nk matrix", "visibility": "hidden", "points": 15, "check": "memory",
     "N": 1024, "Nk": 1024, "d": 16, "dtype": "fp16", "Br": 128, "Bc": 128},
    # END HIDDEN TESTS
]


def forward(chip, *, Br: int, Bc: int, scale: float) -> None:
    """Algorithm 1: read Q, K, V from HBM; write O (Q's dtype) and ℓ, m (float32) to HBM."""
    # BEGIN SOLUTION: follow lines 1–13 of Algorithm 1; the outer loop runs over K/V blocks
    N, d = chip.hbm.tensors["Q"].shape
    Nk = chip.hbm.tensors["K"].shape[0]
    Tr, Tc = -(-N // Br), -(-Nk // Bc)  # lines 3–4
    chip.hbm.alloc("O", (N, d), chip.hbm.tensors["Q"].dtype)
    chip.hbm.alloc("ℓ", (N,), np.float32)
    chip.hbm.alloc("m", (N,), np.float32)
    for i in range(Tr):  # line 2: O = 0, ℓ = 0, m = −∞ in HBM
        rows = (i * Br, min((i + 1) * Br, N))
        r = rows[1] - rows[0]
        chip.store("O", chip.put("zero_O", np.zeros((r, d))), rows)
        chip.store("ℓ", chip.put("zero_ℓ", np.zeros(r)), rows)
        chip.store("m", chip.put("init_m", np.full(r, -np.inf)), rows)
        chip.free("zero_O", "zero_ℓ", "init_m")
    for j in range(Tc):  # line 5
        cols = (j * Bc, min((j + 1) * Bc, Nk))
        K_j = chip.load("K_j", "K", cols)  # line 6: (Bc, d) SRAM
        V_j = chip.load("V_j", "V", cols)
        for i in range(Tr):  # line 7
            rows = (i * Br, min((i + 1) * Br, N))
            Q_i = chip.load("Q_i", "Q", rows)  # line 8: (Br, d) SRAM
            O_i = chip.load("O_i", "O", rows)
            ℓ_i = chip.load("ℓ_i", "ℓ", rows)
            m_i = chip.load("m_i", "m", rows)
            S_ij = chip.put("S_ij", scale * chip.matmul(Q_i, K_j.T))  # line 9: (Br, Bc)
            m̃ = chip.put("m̃_ij", S_ij.max(axis=1))  # line 10
            P̃ = chip.put("P̃_ij", np.exp(S_ij - m̃[:, None]), replaces=["S_ij"])
            ℓ̃ = chip.put("ℓ̃_ij", P̃.sum(axis=1))
            m_new = chip.put("m_new", np.maximum(m_i, m̃))  # line 11
            α = chip.put("α", np.exp(m_i - m_new))  # e^(m_i − m_new); m_i = −∞ gives 0
            β = chip.put("β", np.exp(m̃ - m_new))
            ℓ_new = chip.put("ℓ_new", α * ℓ_i + β * ℓ̃)
            O_i = chip.put("O_i", ((ℓ_i * α)[:, None] * O_i + β[:, None] * chip.matmul(P̃, V_j)) / ℓ_new[:, None])
            chip.store("O", O_i, rows)  # line 12
            chip.store("ℓ", ℓ_new, rows)  # line 13
            chip.store("m", m_new, rows)
            chip.free("Q_i", "O_i", "ℓ_i", "m_i", "m̃_ij", "P̃_ij", "ℓ̃_ij", "m_new", "α", "β", "ℓ_new")
        chip.free("K_j", "V_j")
    # END SOLUTION
