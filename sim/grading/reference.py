"""The grader's float64 judge: `sim.reference`, a block of query rows at a time, so no N × Nk matrix is ever whole."""

import numpy as np

from sim import reference

CHUNK_ELEMENTS = 1 << 17  # query rows × keys per call: 1 MiB of float64 scores


def _chunks(N: int, Nk: int, causal: bool):
    """(r0, r1, keys): query rows r0…r1−1 and the keys 0…keys−1 that any of them may see.

    With the causal mask aligned bottom-right, row r sees key c ≤ r + Nk − N; cutting the keys at the
    chunk's last row's limit keeps that alignment inside `sim.reference`, which aligns (r1 − r0) rows
    to `keys` keys the same way.
    """
    step = max(1, CHUNK_ELEMENTS // max(Nk, 1))
    for r0 in range(0, N, step):
        r1 = min(N, r0 + step)
        yield r0, r1, (min(Nk, max(0, r1 + Nk - N)) if causal else Nk)


def forward(q, k, v, *, causal: bool, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(o, lse) of attention in float64, for q (N, d) and k, v (Nk, d)."""
    N, Nk = q.shape[0], k.shape[0]
    o, lse = np.zeros((N, v.shape[1])), np.full(N, -np.inf)
    for r0, r1, keys in _chunks(N, Nk, causal):
        if keys:
            o[r0:r1], lse[r0:r1] = reference.attention(q[r0:r1], k[:keys], v[:keys], causal=causal, scale=scale)
    return o, lse


def backward(q, k, v, do, *, causal: bool, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dq, dk, dv) in float64: dq row block by row block, dk and dv summed over the row blocks."""
    N, Nk = q.shape[0], k.shape[0]
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for r0, r1, keys in _chunks(N, Nk, causal):
        if keys:
            dq[r0:r1], dk_part, dv_part = reference.attention_backward(
                q[r0:r1], k[:keys], v[:keys], do[r0:r1], causal=causal, scale=scale
            )
            dk[:keys] += dk_part
            dv[:keys] += dv_part
    return dq, dk, dv
