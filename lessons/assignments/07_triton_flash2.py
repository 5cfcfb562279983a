"""Assignment 7 — the FlashAttention-2 forward pass as a Triton kernel, graded on a CPU by its bytes.

What to implement
    `flash2_forward`, a `@triton.jit` kernel: FlashAttention-2's forward pass (Dao, 2023,
    Algorithm 1), one program per block of Br = BLOCK_M query rows, launched by the grader as

        flash2_forward[(ceil(N / BLOCK_M),)](Q, K, V, O, L, W, N, Nk, d, scale,
                                             BLOCK_M=Br, BLOCK_N=Bc, BLOCK_D=D, CAUSAL=causal)

    Q (N, d) and K, V (Nk, d) are row-major in HBM, in fp16 or fp32; N, Nk and d need not be
    multiples of anything (D is d rounded up to a power of two, at least 16: mask the columns past
    d). Write O (N, d, Q's dtype) and the log-sum-exp L (N,, float32), each once. Program i loads
    Q_i once, keeps O_i, ℓ_i, m_i in registers while K_j, V_j (Bc rows each) stream through,
    rescales O_i once at the end, and writes L_i = m_i + log ℓ_i (natural log). With CAUSAL, query
    r sees key c only if c ≤ r + Nk − N: mask the tiles that cross that line and do not load the
    K/V blocks no row of Q_i may see; a row that sees no key has O = 0 and L = −∞. W is an N × Nk
    float32 scratch in HBM that FlashAttention never needs: every byte you move through it counts.

The API you may use
    triton, triton.language as tl, math, and constants written NAME = tl.constexpr(value), the
    value a literal or arithmetic of numbers (2 * 64, 1 / math.log(2)):
    tl.program_id, tl.arange, tl.load (mask=, other=), tl.store, tl.dot, tl.trans, tl.where,
    tl.maximum, tl.max, tl.sum, tl.exp2, tl.exp, tl.log, tl.zeros, tl.full, a tensor's .to() and
    .dtype, and the rest of triton.language's kernel API. Tensor descriptors
    (tl.make_tensor_descriptor, .load, .store) are counted like pointers, but need rows of a
    multiple of 16 bytes, which the tests' d does not promise; block pointers (tl.make_block_ptr)
    are gone from Triton 3.9. The grader reads your file's syntax before anything runs and refuses
    every other module, name, dunder or `.handle`: compute only through tl.load and tl.store. Where
    the GPU compiler and the interpreter could disagree it refuses too: each name defined once;
    annotations only names (tl.constexpr); defaults only literals; `and`/`or` only as a condition or
    between constants; tl.constexpr() only of a literal; no `is`; and while it runs, a loop's step
    below zero only where its `for` holds it as a constant (range(hi, -1, -BLOCK_N), or a local
    STEP: tl.constexpr = -BLOCK_N): one kept in a plain variable or made from an argument runs no
    iteration on a GPU. The Triton tutorial "Fused
    Attention" is the model to learn from; write your own kernel.
    Part 2, the backward, is assignment 8.

How it is graded
    On a CPU, under Triton's interpreter (TRITON_INTERPRET=1), in a separate process:
    - refused before it runs: anything outside the API above, and a kernel that does not compile
      for a real GPU (sm_90, compiled on the CPU in a fresh process);
    - the kernel's arguments point at decoy buffers that hold NaN; every load and store is
      redirected to the grader's own copy, one element at a time under your mask, and an address
      outside the arguments fails the test before memory is touched;
    - correctness: O and L against float64 on fresh seeded random shapes (ragged, N ≠ Nk, causal,
      fp16/fp32, large logits), within FlashAttention-2's bound (O rounded once: u·|ref| +
      1e-5·max|ref|, plus what rounding each score to float32 moves O by, which grows with the
      logits); so keep P̃_ij in float32 for P̃_ij V_j (tl.dot(P, V.to(tl.float32)));
    - SRAM: at every load, store, atomic add and tl.dot, what your program holds must fit in the test's
      SRAM: twice the simulator listing's peak at the same blocks (whole blocks, d rounded up to
      D): room for one Br × D block of Q, one Bc × D block each of K and V. Every tile counts,
      wherever it is kept (a variable, a tuple or list, only inside an expression, bitcast to
      integers; the tile a load returns too) while a later statement may still read it (a GPU
      frees it after its last use); the addresses, offsets and masks you make from
      tl.program_id, tl.arange and the scalar arguments do not; a program keeps nothing past its end;
    - IO: every element your masks let through, at its element size, per tensor, against the
      simulator's listing of FlashAttention-2 at the same blocks (sim.machine.iomodel.flash2): full marks
      when they match, none at 1.5× the optimum in deviation; the feedback names the tensor and
      the line of your kernel that moved it.
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

What the interpreter is not
    It runs each program in turn, one after another, on NumPy: races do not show, nothing is timed,
    a grade takes seconds, not microseconds. tl.dot on fp32 is exact fp32 there (on a GPU it is
    TF32 unless input_precision="ieee"), and bf16 in tl.dot is computed wrong there: the grader uses
    fp16 and fp32 only. Triton (pip install 'flashsim[assignments-triton]', about 1 GB) runs on
    Linux x86_64 and aarch64; on macOS or Windows run the grader in a Linux container or VM
    (docker run -it -v "$PWD":/work python:3.12 bash, then pip install inside; or WSL 2).

On a GPU
    The same kernel runs unchanged on an NVIDIA GPU with torch tensors (W is never touched, so one
    element will do); time it against PyTorch's SDPA on the same inputs:

        q, k, v = (torch.randn(N, d, device="cuda", dtype=torch.float16) for _ in range(3))
        o, L, W = torch.empty_like(q), torch.empty(N, device="cuda"), torch.empty(1, device="cuda")
        grid = (triton.cdiv(N, 64),)
        ours = triton.testing.do_bench(lambda: flash2_forward[grid](q, k, v, o, L, W, N, N, d, d**-0.5,
                                       BLOCK_M=64, BLOCK_N=64, BLOCK_D=d, CAUSAL=False))  # d a power of 2
        sdpa = triton.testing.do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(
                                       q[None, None], k[None, None], v[None, None]))

    Expect SDPA to win until you tune the blocks and num_warps (flash2_forward[grid](…, num_warps=4)).

How to check yourself
    flashsim grade --self-check 07_triton_flash2.py
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2 e): the GPU's exp2 is one instruction
LN2 = tl.constexpr(0.6931471805599453)

GRADING = {
    "title": "FlashAttention-2 forward in Triton",
    "driver": "triton",
    "entry": "flash2_forward",
    "algorithm": "flash2",
    "io_hint": "load Q_i once per program, and K_j, V_j once per K/V block it sees",
    "timeout_s": 30,
}

TESTS = [
    {"name": "one block", "visibility": "public", "points": 10, "check": "output",
     "N": [8, 32], "Nk": [8, 32], "d": 16, "dtype": "fp32", "Br": 32, "Bc": 32, "sram_slack": 2.0},
    {"name": "ragged, N ≠ Nk, fp16", "visibility": "public", "points": 15, "check": "output",
     "N": [40, 100], "Nk": [40, 100], "d": [10, 40], "dtype": "fp16", "Br": 32, "Bc": 32, "sram_slack": 2.0},
    {"name": "causal, fp16", "visibility": "public", "points": 15, "check": "output",
     "N": [40, 100], "Nk": "N", "d": 32, "dtype": "fp16", "Br": 32, "Bc": 32, "causal": True, "sram_slack": 2.0},
    {"name": "IO against FlashAttention-2", "visibility": "public", "points": 15, "check": "io",
     "N": [100, 160], "Nk": [100, 160], "d": 32, "dtype": "fp16", "Br": 32, "Bc": 32, "sram_slack": 2.0},
    # BEGIN HIDDEN TESTS
    {"name": "causal, N > Nk: rows that see no key", "visibility": "hidden", "points": 10, "check": "output",
     "N": [60, 100], "Nk": [10, 40], "d": 16, "dtype": "fp32", "Br": 32, "Bc": 16, "causal": True, "sram_slack": 2.0},
    {"name": "logits in the hundreds", "visibility": "hidden", "points": 10, "check": "output",
     "N": [30, 70], "Nk": [30, 70], "d": 16, "dtype": "fp32", "Br": 16, "Bc": 32, "logit_scale": 8.0, "sram_slack": 2.0},
    {"name": "IO, causal, N < Nk", "visibility": "hidden", "points": 15, "check": "io",
     "N": [60, 100], "Nk": [120, 160], "d": 24, "dtype": "fp16", "Br": 32, "Bc": 32, "causal": True, "sram_slack": 2.0},
    {"name": "IO, d = 64, fp32", "visibility": "hidden", "points": 10, "check": "io",
     "N": [90, 130], "Nk": [90, 130], "d": 64, "dtype": "fp32", "Br": 32, "Bc": 16, "sram_slack": 2.0},
    # END HIDDEN TESTS
]


@triton.jit
def flash2_forward(Q, K, V, O, L, W, N, Nk, d, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr):  # fmt: skip
    """FlashAttention-2's forward for the Q block of this program: write O_i and L_i once."""
    # BEGIN SOLUTION: one program per Q block: load Q_i once, loop over the K/V blocks it sees, write O_i and L_i
    i = tl.program_id(0)
    rows = i * BLOCK_M + tl.arange(0, BLOCK_M)  # this program's query rows
    cols = tl.arange(0, BLOCK_D)
    row_ok, col_ok = rows < N, cols < d
    Q_i = tl.load(Q + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # line 4: running max, in log2 units
    ℓ_i = tl.zeros((BLOCK_M,), tl.float32)
    O_i = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)  # (Br, D) registers
    hi = Nk
    if CAUSAL:  # the K/V blocks some row of Q_i sees: a prefix that ends at the block of the last row's last key
        last = tl.minimum((i + 1) * BLOCK_M, N) - 1 + Nk - N
        hi = tl.where(last < 0, 0, tl.minimum(Nk, (last // BLOCK_N + 1) * BLOCK_N))
    for start in range(0, hi, BLOCK_N):  # line 5: the K/V blocks j
        keys = start + tl.arange(0, BLOCK_N)
        kv = (keys < Nk)[:, None] & col_ok[None, :]
        K_j = tl.load(K + keys[:, None] * d + cols[None, :], mask=kv, other=0.0)  # line 6: (Bc, D)
        V_j = tl.load(V + keys[:, None] * d + cols[None, :], mask=kv, other=0.0)
        S_ij = tl.dot(Q_i, tl.trans(K_j)) * (scale * LOG2E)  # line 8: S_ij = τ Q_i K_jᵀ, (Br, Bc), log2 units
        seen = (keys < Nk)[None, :]
        if CAUSAL:
            seen = seen & (keys[None, :] <= rows[:, None] + Nk - N)
        S_ij = tl.where(seen, S_ij, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(S_ij, axis=1))  # line 9
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: exp2(−∞ − 0) = 0
        S_ij = tl.exp2(S_ij - shift[:, None])  # P̃_ij, in place of S_ij
        α = tl.exp2(m_i - shift)
        ℓ_i = α * ℓ_i + tl.sum(S_ij, axis=1)
        O_i = O_i * α[:, None] + tl.dot(S_ij, V_j.to(tl.float32))  # line 10: P̃_ij V_j in float32
        m_i = m_new
    O_i = O_i / tl.where(ℓ_i > 0, ℓ_i, 1.0)[:, None]  # line 12
    tl.store(O + rows[:, None] * d + cols[None, :], O_i.to(O.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])
    L_i = tl.where(ℓ_i > 0, m_i * LN2 + tl.log(ℓ_i), float("-inf"))  # line 13: L_i = m_i + log ℓ_i
    tl.store(L + rows, L_i, mask=row_ok)
    # END SOLUTION
