"""Reference solutions of lesson 4: each block replaces the exercise cell of the same name."""

import numpy as np

# %% exercise:partial_output
def partial_output(Q_i, K_seen, V_seen, τ):
    """O_i after the K/V blocks holding K_seen, V_seen: (Br, d)."""
    S = τ * np.asarray(Q_i, dtype=np.float64) @ np.asarray(K_seen, dtype=np.float64).T  # (Br, keys seen)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return (P / P.sum(axis=1, keepdims=True)) @ V_seen

# %% exercise:update
def update(O_i, ℓ_i, m_i, S_ij, V_j):
    """Algorithm 1, lines 10–12: (O_i, ℓ_i, m_i) after one more K/V block; O_i (Br, d), ℓ_i and m_i (Br,)."""
    m̃_ij = S_ij.max(axis=1)  # line 10
    P̃_ij = np.exp(S_ij - m̃_ij[:, None])  # (Br, Bc)
    ℓ̃_ij = P̃_ij.sum(axis=1)
    m_new = np.maximum(m_i, m̃_ij)  # line 11
    α, β = np.exp(m_i - m_new), np.exp(m̃_ij - m_new)  # m_i = −∞ on the first block gives α = 0
    ℓ_new = α * ℓ_i + β * ℓ̃_ij
    O_new = ((ℓ_i * α)[:, None] * O_i + β[:, None] * (P̃_ij @ V_j)) / ℓ_new[:, None]  # line 12
    return O_new, ℓ_new, m_new
