"""Assignment 5 (GPU, optional) — the online-softmax update inside the readable CUDA kernel.

What to implement
    `online_softmax_row_source()` returns CUDA C source (a str of at most 4,096 characters) defining

        __device__ void online_softmax_row(float* S, int n, float* m, float* l, float* rescale)

    the per-row step of FlashAttention-2's Algorithm 1, line 9, for one thread that owns one row.
    On entry S holds the row's n = Bc scores τ·q·k in shared memory (−∞ where the causal mask hides a
    key or past the last key), *m and *l the row's running max and sum. On return: *m is the new max
    m_new = max(m, max S), every S[c] holds P̃ = exp(S[c] − m_new), *rescale = exp(m_old − m_new),
    *l = *rescale · l_old + Σ P̃. A row that has seen no key keeps m = −∞: shift by 0 there, never
    compute −∞ − (−∞). The grader compiles your function into `gpu/kernels/01_flash2_readable.cu` in
    place of its own line 9 (one thread per row, as there) and runs the kernel.

The API you may use
    CUDA C device code: expf, fmaxf, the NEG_INF macro the kernel defines. No preprocessor: the source
    may hold no '#' but on `#pragma unroll` lines (no #include, no #define). The kernel file itself is
    the model; write the function, do not copy line 9 (that is plagiarism).

How it is graded
    On an NVIDIA GPU with CuPy: O and L of the whole kernel against float64 on fresh seeded random
    shapes (ragged, N ≠ Nk, causal, large logits, fp32/fp16/bf16), in the same report format as the
    simulator assignments; no IO or memory tests (the kernel's traffic is the project's own code). Your
    Python only hands the source over: the grader compiles and runs it in a process of its own.
    On a machine without a GPU the grader prints one line saying so and grades nothing.
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

How to check yourself
    flashsim grade --self-check 05_gpu_online_softmax.py      (on a machine with a GPU)
"""

GRADING = {
    "title": "Online softmax in the readable CUDA kernel",
    "driver": "gpu",
    "entry": "online_softmax_row_source",
    "timeout_s": 60,  # the first test starts CUDA and each compiles the kernel (NVRTC)
}

TESTS = [
    {"name": "one K/V block, fp32", "visibility": "public", "points": 20, "check": "output",
     "N": [8, 32], "Nk": [8, 32], "d": 16, "dtype": "fp32", "Br": 32, "Bc": 32},
    {"name": "many K/V blocks, fp16", "visibility": "public", "points": 20, "check": "output",
     "N": [100, 200], "Nk": [100, 200], "d": 64, "dtype": "fp16", "Br": 32, "Bc": 32},
    # BEGIN HIDDEN TESTS
    {"name": "causal, N > Nk, bf16", "visibility": "hidden", "points": 20, "check": "output",
     "N": [90, 150], "Nk": [20, 80], "d": 32, "dtype": "bf16", "Br": 32, "Bc": 32, "causal": True},
    {"name": "causal, N < Nk, logits in the hundreds", "visibility": "hidden", "points": 20, "check": "output",
     "N": [40, 90], "Nk": [100, 200], "d": 16, "dtype": "fp32", "Br": 32, "Bc": 32, "causal": True, "logit_scale": 8.0},
    {"name": "ragged, d = 128", "visibility": "hidden", "points": 20, "check": "output",
     "N": [33, 97], "Nk": [33, 97], "d": 128, "dtype": "fp16", "Br": 32, "Bc": 32},
    # END HIDDEN TESTS
]


def online_softmax_row_source() -> str:
    """CUDA source of online_softmax_row (line 9 of FlashAttention-2's Algorithm 1, for one row)."""
    # BEGIN SOLUTION: return the CUDA source of the device function as a string
    return r"""
__device__ void online_softmax_row(float* S, int n, float* m, float* l, float* rescale)
{
    float m_new = *m;
    for (int c = 0; c < n; ++c) m_new = fmaxf(m_new, S[c]);
    const float shift = m_new == NEG_INF ? 0.f : m_new;  // a row that has seen no key: exp(−∞ − 0) = 0
    float rowsum = 0.f;
    for (int c = 0; c < n; ++c) {
        const float p = expf(S[c] - shift);
        S[c] = p;
        rowsum += p;
    }
    *rescale = expf(*m - shift);
    *l = *rescale * *l + rowsum;
    *m = m_new;
}
"""
    # END SOLUTION
