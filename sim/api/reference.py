"""Float64 reference attention: the judge of every fast path, in blocks of query rows.

The textbook formulas, evaluated a block of rows at a time so that no N × Nk matrix is ever held
whole: a block's scores S_r = τ q_r kᵀ are (rows, Nk) with rows × Nk ≤ `BLOCK_ELEMENTS` (16 MiB of
float64), so the reference of a 32K × 32K run takes what its inputs and outputs take, plus one block.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from sim.machine import mask

BLOCK_ELEMENTS = 2**21  # float64 scores of one block of rows, every head together: 16 MiB


@dataclass(frozen=True)
class Rows:
    """One block of query rows r0 … r1 − 1 (every head): its output, log-sum-exp and largest |score|."""

    r0: int
    r1: int
    o: np.ndarray  # (..., rows, d) float64
    lse: np.ndarray  # (..., rows) float64, −∞ for a row that sees no key
    s_max: float  # max |S| over the block's scores, before the causal mask


def scale_of(q: np.ndarray, scale: float | None) -> float:
    """τ: 1/√d unless given."""
    return 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale


def row_blocks(N: int, Nk: int, heads: int = 1) -> Iterator[tuple[int, int]]:
    """[r0, r1) of each block of query rows whose scores for every head fit `BLOCK_ELEMENTS`."""
    rows = max(1, BLOCK_ELEMENTS // max(1, Nk * heads))
    for r0 in range(0, N, rows):
        yield r0, min(r0 + rows, N)


def blocks(q, k, v, *, causal: bool = False, scale: float | None = None, dropout_mask=None) -> Iterator[Rows]:
    """softmax(τ q kᵀ) v in float64, one block of query rows after another; leading dimensions batch.

    q is (..., N, d), k and v (..., Nk, d). `dropout_mask` Z, if given, multiplies the probabilities
    (o = (P ∘ Z) v): an (..., N, Nk) array, or a function of (r0, r1) returning its rows r0 … r1 − 1.
    """
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    tau, N = scale_of(q, scale), q.shape[-2]
    kT = np.swapaxes(k, -1, -2)  # (..., d, Nk)
    for r0, r1 in row_blocks(N, k.shape[-2], int(np.prod(q.shape[:-2], dtype=np.int64))):
        e, m, ℓ, s_max = _exp_scores(q[..., r0:r1, :], kT, r0, N, causal, tau)  # e: (..., rows, Nk)
        if dropout_mask is not None:
            e *= _mask_rows(dropout_mask, r0, r1)
        with np.errstate(invalid="ignore", divide="ignore"):
            o = np.where(ℓ > 0, (e @ v) / ℓ, 0.0)  # (..., rows, d)
            lse = np.where(ℓ[..., 0] > 0, m[..., 0] + np.log(ℓ[..., 0]), -np.inf)
        del e  # before the next block's scores are made
        yield Rows(r0, r1, o, lse, s_max)


def attention(q, k, v, *, causal: bool = False, scale: float | None = None, dropout_mask=None):
    """softmax(scale · q kᵀ) v in float64, with its log-sum-exp; leading dimensions batch.

    q is (..., N, d), k and v are (..., Nk, d). Returns (o, lse) with o (..., N, d) and
    lse (..., N). A query that sees no key (causal, N > Nk) gets o = 0 and lse = −∞.
    `dropout_mask` Z, if given, multiplies the probabilities: o = (P ∘ Z) v (see `blocks`).
    """
    q = np.asarray(q)
    o, lse = np.empty(q.shape, np.float64), np.empty(q.shape[:-1], np.float64)
    for b in blocks(q, k, v, causal=causal, scale=scale, dropout_mask=dropout_mask):
        o[..., b.r0 : b.r1, :], lse[..., b.r0 : b.r1] = b.o, b.lse
    return o, lse


def attention_backward(q, k, v, do, *, causal: bool = False, scale: float | None = None, dropout_mask=None):
    """The gradients (dq, dk, dv) of attention's output o against an upstream gradient do, in float64.

    The textbook chain rule, a block of query rows r at a time, with no FlashAttention shortcut:
    P_r = softmax(S_r), P_drop = P_r ∘ Z_r, o_r = P_drop v; dv += P_dropᵀ do_r, dP_r = (do_r vᵀ) ∘ Z_r,
    dS_r = P_r ∘ (dP_r − rowsum(P_r ∘ dP_r)), dq_r = τ dS_r k, dk += τ dS_rᵀ q_r.
    """
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    tau, N = scale_of(q, scale), q.shape[-2]
    kT, vT = np.swapaxes(k, -1, -2), np.swapaxes(v, -1, -2)
    dq, dk, dv = np.empty(q.shape), np.zeros(k.shape), np.zeros(k.shape)
    for r0, r1 in row_blocks(N, k.shape[-2], int(np.prod(q.shape[:-2], dtype=np.int64))):
        q_r, do_r = q[..., r0:r1, :], do[..., r0:r1, :]
        p, _, ℓ, _ = _exp_scores(q_r, kT, r0, N, causal, tau)
        np.divide(p, ℓ, out=p, where=ℓ > 0)  # P_r (..., rows, Nk); a row that sees no key is all zeros already
        z = None if dropout_mask is None else _mask_rows(dropout_mask, r0, r1)
        dv += np.swapaxes(p if z is None else p * z, -1, -2) @ do_r  # (..., Nk, d)
        ds = do_r @ vT  # dP_r (..., rows, Nk), then dS_r in its place
        if z is not None:
            ds *= z
        ds -= np.einsum("...ij,...ij->...i", p, ds)[..., None]  # dP_r − D_r, D_r = rowsum(P_r ∘ dP_r)
        ds *= p
        dq[..., r0:r1, :] = tau * (ds @ k)
        dk += tau * (np.swapaxes(ds, -1, -2) @ q_r)
        del p, ds  # before the next block's scores are made
    return dq, dk, dv


def _exp_scores(q_r, kT, r0: int, N: int, causal: bool, tau: float):
    """(e, m, ℓ, max |S|) of rows r0 … of q: e = exp(S − m) for S = τ q_r kᵀ (−∞ where the mask hides a key),
    the row max m (0 for a row that sees no key) and row sum ℓ, each (..., rows, ·)."""
    Nk = kT.shape[-1]
    s = q_r @ kT  # (..., rows, Nk)
    s *= tau
    s_max = max(float(s.max(initial=0.0)), -float(s.min(initial=0.0)))  # before the mask, as the tolerance takes it
    if causal:
        np.copyto(s, -np.inf, where=~mask.visible(r0, r0 + q_r.shape[-2], 0, Nk, N, Nk))
    m = s.max(axis=-1, keepdims=True)
    m[np.isneginf(m)] = 0.0
    e = np.exp(np.subtract(s, m, out=s), out=s)  # in place: one (rows, Nk) block at a time
    return e, m, e.sum(axis=-1, keepdims=True), s_max


def _mask_rows(dropout_mask: np.ndarray | Callable[[int, int], np.ndarray], r0: int, r1: int) -> np.ndarray:
    if callable(dropout_mask):
        return np.asarray(dropout_mask(r0, r1), dtype=np.float64)
    return np.asarray(dropout_mask, dtype=np.float64)[..., r0:r1, :]
