"""float64 attention on the GPU, forward and backward: the judge of every kernel (inputs taken as stored).

Rows of queries go through in chunks of CHUNK, so the reference holds (CHUNK, Nk) scores at a time, never N × Nk.
"""

import math

from gpu import device, dtypes

CHUNK = 256


def _f64(x):
    return dtypes.to_float32(x).astype(device.require().float64)


def _scores(q_c, k, r0: int, n: int, scale: float, causal: bool):
    """τ q_c kᵀ for query rows r0 … r0 + len(q_c) − 1 of n, −∞ where the bottom-right causal mask hides a key."""
    cupy = device.require()
    s = (q_c @ k.swapaxes(-1, -2)) * scale
    if causal:
        nk = k.shape[-2]
        hidden = cupy.arange(nk)[None, :] > cupy.arange(r0, r0 + q_c.shape[-2])[:, None] + (nk - n)
        s = cupy.where(hidden, -cupy.inf, s)
    return s


def attention_ref(q, k, v, *, causal=False, scale=None):
    """(o, lse) in float64 for CuPy q (batch, heads, N, d), k, v (batch, heads, Nk, d); bottom-right causal mask.

    A row that sees no key gets o = 0 and lse = −∞."""
    cupy = device.require()
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qf, kf, vf = (_f64(x) for x in (q, k, v))
    o = cupy.empty(q.shape, cupy.float64)
    lse = cupy.empty(q.shape[:-1], cupy.float64)
    for r0 in range(0, n, CHUNK):
        s = _scores(qf[..., r0 : r0 + CHUNK, :], kf, r0, n, scale, causal)  # (…, CHUNK, Nk)
        m = s.max(axis=-1, keepdims=True)
        m = cupy.where(cupy.isinf(m), 0.0, m)  # a row that sees no key: exp(−∞ − 0) = 0, not NaN
        p = cupy.exp(s - m)
        l = p.sum(axis=-1, keepdims=True)
        seen = l > 0
        o[..., r0 : r0 + CHUNK, :] = cupy.where(seen, (p @ vf) / cupy.where(seen, l, 1.0), 0.0)
        lse[..., r0 : r0 + CHUNK] = cupy.where(
            seen[..., 0], m[..., 0] + cupy.log(cupy.where(seen, l, 1.0)[..., 0]), -cupy.inf
        )
    return o, lse


def attention_backward_ref(q, k, v, do, *, causal=False, scale=None):
    """(dq, dk, dv) in float64: the chain rule through P = softmax(S), chunk by chunk of query rows.

    P_c = exp(S_c − lse_c), dV = Σ P_cᵀ dO_c, dP_c = dO_c Vᵀ, dS_c = P_c ∘ (dP_c − rowsum(dO_c ∘ O_c)),
    dQ_c = τ dS_c K, dK = τ Σ dS_cᵀ Q_c, with O and lse from `attention_ref` (exact, not the kernel's).
    """
    cupy = device.require()
    n, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    o, lse = attention_ref(q, k, v, causal=causal, scale=scale)
    qf, kf, vf, dof = (_f64(x) for x in (q, k, v, do))
    D = (dof * o).sum(axis=-1)  # (…, N)
    dq = cupy.empty(q.shape, cupy.float64)
    dk, dv = cupy.zeros(k.shape, cupy.float64), cupy.zeros(v.shape, cupy.float64)
    for r0 in range(0, n, CHUNK):
        rows = slice(r0, r0 + CHUNK)
        s = _scores(qf[..., rows, :], kf, r0, n, scale, causal)
        shift = cupy.where(cupy.isinf(lse[..., rows]), 0.0, lse[..., rows])[..., None]  # a blind row: P = 0
        p = cupy.exp(s - shift)
        dv += p.swapaxes(-1, -2) @ dof[..., rows, :]
        ds = p * (dof[..., rows, :] @ vf.swapaxes(-1, -2) - D[..., rows, None])
        dq[..., rows, :] = scale * (ds @ kf)
        dk += scale * (ds.swapaxes(-1, -2) @ qf[..., rows, :])
    return dq, dk, dv
