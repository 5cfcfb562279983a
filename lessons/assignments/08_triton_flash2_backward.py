"""Assignment 8 — the FlashAttention-2 backward pass as Triton kernels (part 2 of assignment 7), graded by its bytes.

What to implement
    Two `@triton.jit` kernels, FlashAttention-2's backward (Dao, 2023, Algorithm 2) as the
    simulator's listing runs it, launched by the grader one after the other as

        flash2_backward_preprocess[(ceil(N / BLOCK_M),)](O, dO, D, dQ, N, d, BLOCK_M=Br, BLOCK_D=D)
        flash2_backward[(ceil(Nk / BLOCK_N),)](Q, K, V, dO, L, D, dQ, dK, dV, W, N, Nk, d, scale,
                                               BLOCK_M=Br, BLOCK_N=Bc, BLOCK_D=D, CAUSAL=causal)

    HBM holds the forward's inputs Q (N, d), K, V (Nk, d), its output O, the upstream gradient dO
    (N, d), all float32 and row-major, and the log-sum-exp L (N,, float32; −∞ for a row that sees
    no key). The pre-pass writes D_i = rowsum(dO_i ∘ O_i) (N,, float32) and dQ_i = 0. The main
    kernel runs one program per K/V block j: load K_j, V_j once, keep dK_j, dV_j in registers, and
    for each Q block i that sees block j load Q_i, dO_i, L_i, D_i, rebuild P_ij = exp(τ Q_i K_jᵀ −
    L_i) (0 where CAUSAL hides a key: c ≤ r + Nk − N; never stored), dV_j += P_ijᵀ dO_i,
    dP_ij = dO_i V_jᵀ, dS_ij = P_ij ∘ (dP_ij − D_i), add τ dS_ij K_j into dQ_i with tl.atomic_add
    (programs of a GPU run at once: a load and a store would race), dK_j += τ dS_ijᵀ Q_i; write dK_j,
    dV_j once. With CAUSAL, start at the first Q block some row of which sees key j·Bc. W is an
    N × Nk float32 scratch that FlashAttention never needs. D = d rounded up to a power of two, ≥ 16.

The API you may use
    As in assignment 7: triton, triton.language as tl, math and literal constants; tl.atomic_add
    for dQ. Nothing else (the grader reads the file before it runs anything).

How it is graded
    As assignment 7, under Triton's interpreter on a CPU, with shadow memory and a compile check
    for sm_90: dQ, dK, dV against the float64 gradient (1e-5 of its largest entry: float32
    storage, fp32 tl.dot exact there), what each program holds (as in assignment 7; an atomic
    add's returned tile too) within twice the simulator listing's SRAM peak, and the HBM bytes
    (an atomic add reads and writes its elements) against the simulator's listing of
    FlashAttention-2's backward at the same blocks (sim.machine.iomodel.flash2_backward_kernels),
    tensor by tensor.
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

What the interpreter is not
    See assignment 7: programs run one after another (the race an atomic add prevents never shows
    there; the compile check and the GPU do), nothing is timed, fp32 tl.dot is exact fp32 (TF32 on a
    GPU unless input_precision="ieee").

How to check yourself
    flashsim grade --self-check 08_triton_flash2_backward.py
"""

import triton
import triton.language as tl

GRADING = {
    "title": "FlashAttention-2 backward in Triton",
    "driver": "triton",
    "entry": "flash2_backward",
    "algorithm": "flash2",
    "pass": "backward",
    "io_hint": "load K_j, V_j once per program, and only the Q blocks that see block j",
    "timeout_s": 30,
}

TESTS = [
    {"name": "not causal", "visibility": "public", "points": 15, "check": "output",
     "N": [20, 70], "Nk": "N", "d": 16, "dtype": "fp32", "Br": 16, "Bc": 32, "sram_slack": 2.0},
    {"name": "causal, ragged d", "visibility": "public", "points": 15, "check": "output",
     "N": [40, 80], "Nk": "N", "d": [10, 30], "dtype": "fp32", "Br": 32, "Bc": 16, "causal": True, "sram_slack": 2.0},
    {"name": "IO, causal", "visibility": "public", "points": 20, "check": "io",
     "N": [60, 100], "Nk": "N", "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "causal": True, "sram_slack": 2.0},
    # BEGIN HIDDEN TESTS
    {"name": "causal, N < Nk", "visibility": "hidden", "points": 10, "check": "output",
     "N": [10, 40], "Nk": [50, 80], "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "causal": True, "sram_slack": 2.0},
    {"name": "causal, N > Nk: rows that see no key", "visibility": "hidden", "points": 10, "check": "output",
     "N": [50, 80], "Nk": [10, 30], "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "causal": True, "sram_slack": 2.0},
    {"name": "larger logits", "visibility": "hidden", "points": 10, "check": "output",
     "N": [20, 50], "Nk": [20, 50], "d": 16, "dtype": "fp32", "Br": 16, "Bc": 16, "logit_scale": 3.0, "sram_slack": 2.0},
    {"name": "IO, N ≠ Nk", "visibility": "hidden", "points": 20, "check": "io",
     "N": [50, 90], "Nk": [60, 100], "d": 32, "dtype": "fp32", "Br": 32, "Bc": 16, "sram_slack": 2.0},
    # END HIDDEN TESTS
]


@triton.jit
def flash2_backward_preprocess(O, dO, D, dQ, N, d, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """The pre-pass for this program's Q block: D_i = rowsum(dO_i ∘ O_i), dQ_i = 0."""
    # BEGIN SOLUTION: load O_i and dO_i, store their rows' dot products to D and zeros to dQ
    i = tl.program_id(0)
    rows = i * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    tile = (rows < N)[:, None] & (cols < d)[None, :]
    at = rows[:, None] * d + cols[None, :]
    O_i = tl.load(O + at, mask=tile, other=0.0)  # (Br, D) registers
    dO_i = tl.load(dO + at, mask=tile, other=0.0)
    tl.store(D + rows, tl.sum(dO_i * O_i, axis=1), mask=rows < N)  # line 4: D_i = rowsum(dO_i ∘ O_i)
    tl.store(dQ + at, tl.zeros((BLOCK_M, BLOCK_D), tl.float32), mask=tile)
    # END SOLUTION


@triton.jit
def flash2_backward(Q, K, V, dO, L, D, dQ, dK, dV, W, N, Nk, d, scale, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr):  # fmt: skip
    """FlashAttention-2's backward for this program's K/V block j: dK_j, dV_j written once, dQ added into."""
    # BEGIN SOLUTION: one program per K/V block: load K_j, V_j once, loop over the Q blocks that see it
    j = tl.program_id(0)
    keys = j * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_D)
    kv = (keys < Nk)[:, None] & (cols < d)[None, :]
    K_j = tl.load(K + keys[:, None] * d + cols[None, :], mask=kv, other=0.0)  # line 6: (Bc, D)
    V_j = tl.load(V + keys[:, None] * d + cols[None, :], mask=kv, other=0.0)
    dK_j = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)  # line 7
    dV_j = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    lo = 0
    if CAUSAL:  # the first Q block with a row r that sees key j·Bc: r ≥ j·Bc − (Nk − N)
        lo = tl.maximum(j * BLOCK_N - Nk + N, 0) // BLOCK_M * BLOCK_M
    for start in range(lo, N, BLOCK_M):  # line 8: the Q blocks i
        rows = start + tl.arange(0, BLOCK_M)
        tile = (rows < N)[:, None] & (cols < d)[None, :]
        at = rows[:, None] * d + cols[None, :]
        Q_i = tl.load(Q + at, mask=tile, other=0.0)  # line 9
        dO_i = tl.load(dO + at, mask=tile, other=0.0)
        L_i = tl.load(L + rows, mask=rows < N, other=0.0)
        D_i = tl.load(D + rows, mask=rows < N, other=0.0)
        seen = (rows < N)[:, None] & (keys < Nk)[None, :]
        if CAUSAL:
            seen = seen & (keys[None, :] <= rows[:, None] + Nk - N)
        S_ij = tl.dot(Q_i, tl.trans(K_j)) * scale  # line 10: (Br, Bc)
        P_ij = tl.where(seen, tl.exp(S_ij - tl.where(seen, L_i[:, None], S_ij)), 0.0)  # line 11: never −∞ − −∞
        dV_j += tl.dot(tl.trans(P_ij), dO_i)  # line 12
        dP_ij = tl.dot(dO_i, tl.trans(V_j))  # line 13
        dS_ij = P_ij * (dP_ij - D_i[:, None])  # line 14
        tl.atomic_add(dQ + at, tl.dot(dS_ij, K_j) * scale, mask=tile)  # line 15: dQ_i += τ dS_ij K_j
        dK_j += tl.dot(tl.trans(dS_ij), Q_i) * scale  # line 16
    tl.store(dK + keys[:, None] * d + cols[None, :], dK_j, mask=kv)  # line 18
    tl.store(dV + keys[:, None] * d + cols[None, :], dV_j, mask=kv)
    # END SOLUTION
