"""Float64 reference attention: the judge of every fast path."""

import numpy as np

from sim import mask


def attention(q, k, v, *, causal: bool = False, scale: float | None = None, dropout_mask=None):
    """softmax(scale · q kᵀ) v in float64, with its log-sum-exp; leading dimensions batch.

    q is (..., N, d), k and v are (..., Nk, d). Returns (o, lse) with o (..., N, d) and
    lse (..., N). A query that sees no key (causal, N > Nk) gets o = 0 and lse = −∞.
    `dropout_mask` Z (..., N, Nk), if given, multiplies the probabilities: o = (P ∘ Z) v.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    N, d = q.shape[-2:]
    Nk = k.shape[-2]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    s = scale * (q @ np.swapaxes(k, -1, -2))  # (..., N, Nk)
    if causal:
        s = np.where(mask.visible(0, N, 0, Nk, N, Nk), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    p = np.exp(s - m)
    ℓ = p.sum(axis=-1, keepdims=True)  # the softmax's denominator: dropout does not change it
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
    N, d = q.shape[-2:]
    Nk = k.shape[-2]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    s = scale * (q @ np.swapaxes(k, -1, -2))  # (..., N, Nk)
    if causal:
        s = np.where(mask.visible(0, N, 0, Nk, N, Nk), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(m), 0.0, m))
    ℓ = e.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(ℓ > 0, e / ℓ, 0.0)  # (..., N, Nk)
    z = np.ones_like(p) if dropout_mask is None else np.asarray(dropout_mask, dtype=np.float64)
    dv = np.swapaxes(p * z, -1, -2) @ do  # (..., Nk, d)
    dp = (do @ np.swapaxes(v, -1, -2)) * z  # (..., N, Nk)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return scale * (ds @ k), scale * (np.swapaxes(ds, -1, -2) @ q), dv
