"""float64 attention on the GPU: the judge of every kernel (inputs taken as stored, i.e. already rounded)."""

import math

from gpu import device, dtypes


def attention_ref(q, k, v, *, causal=False, scale=None):
    """(o, lse) in float64 for CuPy q (batch, heads, N, d), k, v (batch, heads, Nk, d); bottom-right causal mask."""
    cupy = device.require()
    n, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    qf, kf, vf = (dtypes.to_float32(x).astype(cupy.float64) for x in (q, k, v))
    s = (qf @ kf.swapaxes(-1, -2)) * scale
    if causal:
        hidden = cupy.arange(nk)[None, :] > cupy.arange(n)[:, None] + (nk - n)
        s = cupy.where(hidden, -cupy.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = cupy.where(cupy.isinf(m), 0.0, m)  # a row that sees no key: exp(−∞ − 0) = 0, not NaN
    p = cupy.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    seen = l > 0
    o = cupy.where(seen, (p @ vf) / cupy.where(seen, l, 1.0), 0.0)
    lse = cupy.where(seen[..., 0], m[..., 0] + cupy.log(cupy.where(seen, l, 1.0)[..., 0]), -cupy.inf)
    return o, lse
