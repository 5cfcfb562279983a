"""Float64 reference attention: the judge of every fast path."""

import numpy as np

from sim import mask


def _scale(q: np.ndarray, scale: float | None) -> float:
    return 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale


def _exp_scores(q: np.ndarray, k: np.ndarray, causal: bool, scale: float | None):
    """(e, m, ℓ): e = exp(S − m) for the scores S = τ q kᵀ (−∞ where the causal mask hides a key), their
    row max m (0 for a row that sees no key) and row sum ℓ, each (..., N, ·)."""
    N, Nk = q.shape[-2], k.shape[-2]
    s = _scale(q, scale) * (q @ np.swapaxes(k, -1, -2))  # (..., N, Nk)
    if causal:
        s = np.where(mask.visible(0, N, 0, Nk, N, Nk), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - m)
    return e, m, e.sum(axis=-1, keepdims=True)


def attention(q, k, v, *, causal: bool = False, scale: float | None = None, dropout_mask=None):
    """softmax(scale · q kᵀ) v in float64, with its log-sum-exp; leading dimensions batch.

    q is (..., N, d), k and v are (..., Nk, d). Returns (o, lse) with o (..., N, d) and
    lse (..., N). A query that sees no key (causal, N > Nk) gets o = 0 and lse = −∞.
    `dropout_mask` Z (..., N, Nk), if given, multiplies the probabilities: o = (P ∘ Z) v.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    p, m, ℓ = _exp_scores(q, k, causal, scale)  # ℓ, the softmax's denominator: dropout does not change it
    if dropout_mask is not None:
        p = p * np.asarray(dropout_mask, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(ℓ > 0, (p @ v) / ℓ, 0.0)
        lse = np.where(ℓ[..., 0] > 0, m[..., 0] + np.log(ℓ[..., 0]), -np.inf)
    return o, lse


def attention_backward(q, k, v, do, *, causal: bool = False, scale: float | None = None, dropout_mask=None):
    """The gradients (dq, dk, dv) of attention's output o against an upstream gradient do, in float64.

    The textbook chain rule through the materialized N × Nk matrices, with no FlashAttention
    shortcut: P = softmax(S), P_drop = P ∘ Z, o = P_drop v, then dv = P_dropᵀ do,
    dP = (do vᵀ) ∘ Z, dS = P ∘ (dP − rowsum(P ∘ dP)), dq = τ dS k, dk = τ dSᵀ q.
    """
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    scale = _scale(q, scale)
    e, _, ℓ = _exp_scores(q, k, causal, scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(ℓ > 0, e / ℓ, 0.0)  # (..., N, Nk)
    z = np.ones_like(p) if dropout_mask is None else np.asarray(dropout_mask, dtype=np.float64)
    dv = np.swapaxes(p * z, -1, -2) @ do  # (..., Nk, d)
    dp = (do @ np.swapaxes(v, -1, -2)) * z  # (..., N, Nk)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return scale * (ds @ k), scale * (np.swapaxes(ds, -1, -2) @ q), dv
