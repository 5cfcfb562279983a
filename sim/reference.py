"""Float64 reference attention: the judge of every fast path."""

import numpy as np

from sim import mask


def attention(q, k, v, *, causal: bool = False, scale: float | None = None):
    """softmax(scale · q kᵀ) v in float64, with its log-sum-exp; leading dimensions batch.

    q is (..., N, d), k and v are (..., Nk, d). Returns (o, lse) with o (..., N, d) and
    lse (..., N). A query that sees no key (causal, N > Nk) gets o = 0 and lse = −∞.
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
    ℓ = p.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(ℓ > 0, (p @ v) / ℓ, 0.0)
        lse = np.where(ℓ[..., 0] > 0, m[..., 0] + np.log(ℓ[..., 0]), -np.inf)
    return o, lse
