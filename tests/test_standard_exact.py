"""Algorithm 0 through the chip gives, bit for bit, what plain NumPy gives taking the same steps in the same order:
S_ij = τ·Q_i K_jᵀ in float32, rounded to the storage dtype by NumPy's own astype; each row's softmax in float32 (each
exponential float64's rounded to float32, as the chip takes it within half an ulp); P
rounded likewise; O_i = Σ_j P_ij V_j accumulated in float32, then rounded. The simulator's speed-ups (its own fp16
rounding in sim/machine/storage_cast.py, HBM's float32 copy kept by every write, the unmasked division) may change
no bit of O or of the P it leaves for the backward, and no byte of its ledger (the closed form's)."""

import numpy as np
import pytest

import sim
from sim.algorithms.registry import counts
from sim.core.dtypes import DTYPES


def plain_numpy(q, k, v, Br: int, Bc: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """O and P of Algorithm 0 from the definition, tile by tile as the listing orders its float32 arithmetic."""
    Q, K, V = (x.astype(np.float32) for x in (q, k, v))
    (N, d), Nk = Q.shape, K.shape[0]
    S = np.empty((N, Nk), np.float32)
    for r in range(0, N, Br):
        for c in range(0, Nk, Bc):
            Q_i, K_j = Q[r : r + Br].copy(), K[c : c + Bc].copy()  # tiles in SRAM
            S[r : r + Br, c : c + Bc] = (scale * (Q_i @ K_j.T)).astype(q.dtype)  # S in HBM
    m = S.max(axis=1)
    P̃ = np.exp((S - m[:, None]).astype(np.float64)).astype(np.float32)  # the chip's exp: float64's, rounded once
    P = (P̃ / P̃.sum(axis=1)[:, None]).astype(q.dtype).astype(np.float32)  # P in HBM
    O = np.empty((N, d), q.dtype)
    for r in range(0, N, Br):
        O_i = np.zeros((min(Br, N - r), d), np.float32)
        for c in range(0, Nk, Bc):
            O_i = O_i + P[r : r + Br, c : c + Bc].copy() @ V[c : c + Bc].copy()
        O[r : r + Br] = O_i.astype(q.dtype)
    return O, P.astype(q.dtype)


def exact_inputs(N: int, Nk: int, d: int, dtype) -> tuple[np.ndarray, ...]:
    """Inputs whose matmuls no summation order can change, so that any BLAS gives the bits the listing's does: q, k
    quarters from −3/4 to 3/4 (every dot product is exact in float32), and v one ±2ᵉ per row, in column j mod d (with
    Bc ≤ 2d a tile's P_ij V_j adds at most two nonzero terms per element: one rounding, in any order)."""
    rng = np.random.default_rng(N + Nk + d)
    q, k = (rng.integers(-3, 4, (n, d)) / 4 for n in (N, Nk))
    v = np.zeros((Nk, d))
    v[np.arange(Nk), np.arange(Nk) % d] = rng.choice([-2, -1, -0.5, 0.5, 1, 2], Nk)
    return tuple(x.astype(dtype) for x in (q, k, v))


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("N, Nk, d, Br, Bc", [(256, 256, 64, 64, 64), (300, 173, 40, 64, 48)])
@pytest.mark.parametrize("scale", [None, 4.0])  # 4.0: sharp rows, most probabilities among fp16's subnormals
def test_standard_is_plain_numpy_bit_for_bit(dtype, N, Nk, d, Br, Bc, scale):
    q, k, v = exact_inputs(N, Nk, d, DTYPES[dtype])
    r = sim.run("standard", q, k, v, block_rows=Br, block_cols=Bc, scale=scale, hardware="H100-SXM")
    O, P = plain_numpy(q, k, v, Br, Bc, r.scale)
    assert np.array_equal(r.output.view(np.uint8), O.view(np.uint8))
    assert np.array_equal(r.saved["P"].view(np.uint8), P.view(np.uint8))
    tiny = np.abs(P.astype(np.float32)) < 2.0**-14
    if dtype == "fp16" and scale:
        assert tiny.mean() > 0.5  # the subnormal path really ran
    c = counts("standard", N, Nk, d, DTYPES[dtype].itemsize, Br, Bc, False)
    assert (r.hbm_read_bytes, r.hbm_write_bytes, r.flops) == (c.hbm_read_bytes, c.hbm_write_bytes, c.flops)
