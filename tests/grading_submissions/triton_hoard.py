"""Red team 106: 16 K-sized tiles joined into one array, a zero tile split out of it (a view) passed as the K/V
loads' `other`: the SRAM measure left out every value that shared the `other`'s array, and this scored 100."""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2 e): the GPU's exp2 is one instruction
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def flash2_forward(Q, K, V, O, L, W, N, Nk, d, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr):  # fmt: skip
    """FlashAttention-2's forward for the Q block of this program: write O_i and L_i once."""
    i = tl.program_id(0)
    rows = i * BLOCK_M + tl.arange(0, BLOCK_M)  # this program's query rows
    cols = tl.arange(0, BLOCK_D)
    row_ok, col_ok = rows < N, cols < d
    Q_i = tl.load(Q + rows[:, None] * d + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    # a hoard of 16 K-sized tiles in ONE array (15 of ones, 1 of zeros), joined level by level
    H = tl.zeros((BLOCK_N, BLOCK_D), K.dtype.element_ty) + 1.0
    Z = tl.zeros((BLOCK_N, BLOCK_D), K.dtype.element_ty)
    H2 = tl.join(H, H)
    T2 = tl.join(H, Z)
    H4 = tl.join(H2, H2)
    T4 = tl.join(H2, T2)
    H8 = tl.join(H4, H4)
    T8 = tl.join(H4, T4)
    HOARD = tl.join(H8, T8)  # (BLOCK_N, BLOCK_D, 2, 2, 2, 2)
    H = 0.0
    Z = 0.0
    H2 = 0.0
    T2 = 0.0
    H4 = 0.0
    T4 = 0.0
    H8 = 0.0
    T8 = 0.0
    # the zero tile as a VIEW of the hoard (tl.split is a NumPy view under the interpreter): passed as `other`, it
    # is "a fill of one value", and Held.measure leaves out every value whose root array is its root: the hoard
    a, v = tl.split(HOARD)
    a, v = tl.split(v)
    a, v = tl.split(v)
    a, ZERO = tl.split(v)
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
        K_j = tl.load(K + keys[:, None] * d + cols[None, :], mask=kv, other=ZERO)  # line 6: (Bc, D)
        V_j = tl.load(V + keys[:, None] * d + cols[None, :], mask=kv, other=ZERO)
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
    HOARD = 0.0  # dropped before the stores, which pass no `other`
    ZERO = 0.0
    a = 0.0  # noqa: F841 (its tile dropped)
    v = 0.0
    O_i = O_i / tl.where(ℓ_i > 0, ℓ_i, 1.0)[:, None]  # line 12
    tl.store(O + rows[:, None] * d + cols[None, :], O_i.to(O.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])
    L_i = tl.where(ℓ_i > 0, m_i * LN2 + tl.log(ℓ_i), float("-inf"))  # line 13: L_i = m_i + log ℓ_i
    tl.store(L + rows, L_i, mask=row_ok)
