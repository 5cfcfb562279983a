"""Float64 attention as today's LLMs run it, from the definition: explicit masks and biases, forward and backward.

For query head h of a GQA group (K/V head h // g, g = Hq / Hkv), query position i (of N) and key j (of Nk):
  S_ij = τ q_i·k_j                                        the scores
  S_ij ← c·tanh(S_ij / c)                                 softcap c (Gemma 2), before the bias, as FlashAttention
  S_ij ← S_ij − slope_h·|i + Nk − N − j|                  ALiBi, FlashAttention's convention (bottom-right)
  S_ij ← −∞ unless i + Nk − N − left ≤ j ≤ i + Nk − N + right   the window; causal is right = 0
  o_i = Σ_j softmax(S_i)_j v_j,  lse_i = log Σ_j e^(S_ij)  (o_i = 0, lse_i = −∞ where row i sees no key)
The backward is the chain rule through those lines: dS = P ∘ (dP − rowsum(P ∘ dP)), through the softcap
dS ← dS ∘ (1 − tanh²(τ q·k / c)); dq = τ dS k, dk = τ dSᵀ q summed over the group's query heads.
Every mask here is built from i and j directly, never from `sim.machine.mask`, so that it judges it.
"""

import numpy as np

from sim.api.reference import row_blocks, scale_of


def attention(q, k, v, *, causal=False, window=None, alibi_slopes=None, softcap=None, scale=None):
    """(o, lse) in float64 for q (…, Hq, N, d) and k, v (…, Hkv, Nk, d) — or q (N, d), k, v (Nk, d)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    k, v = _repeat(q, k), _repeat(q, v)
    o, lse = np.empty(q.shape), np.empty(q.shape[:-1])
    for r0, r1 in row_blocks(q.shape[-2], k.shape[-2], int(np.prod(q.shape[:-2], dtype=np.int64))):
        p, lse[..., r0:r1], _, _ = _probabilities(q, k, r0, r1, causal, window, alibi_slopes, softcap, scale)
        o[..., r0:r1, :] = p @ v
    return o, lse


def attention_backward(q, k, v, do, *, causal=False, window=None, alibi_slopes=None, softcap=None, scale=None):
    """(dq, dk, dv) in float64, dk and dv summed over each GQA group (shaped like k, v)."""
    return _backward(q, k, v, do, None, causal, window, alibi_slopes, softcap, scale)


def backward_scales(q, k, v, do, *, causal=False, window=None, alibi_slopes=None, softcap=None, scale=None):
    """`attention_backward`'s (dq, dk, dv) and the magnitudes `sim.api.gradient_tolerance` bounds their rounding
    with, each the largest over every element and head (dk's, dv's summed over each group as the gradients are):
      dq     τ·|P ∘ (dP − D)| |k|,  and τ·P |k|        dk   τ·|P ∘ (dP − D)|ᵀ |q|,  and τ·Pᵀ |q|
      dv     Pᵀ |do|                                   dp   |do| |v|ᵀ (bounds |dP| and the rounding of do·v)
      p_dp   rowsum(P ∘ |dP|) (bounds what D_i = rowsum(P_i ∘ dP_i) sums)
      o, s   |o| (the forward's output) and |S| (the scores, before the mask)
      q_sum  τ·Σ_i |q_i| (a column of ones' Pᵀ|q|: what an error of TINY in each P or dS entry reaches dk with)
      k_sum  τ·Σ_j |k_j|,  do_sum  Σ_i |do_i|  (the same for dq and dv)
    (D_i = rowsum(P_i ∘ dP_i); P ∘ (dP − D) is dS before a softcap's 1 − T², which only shrinks it)."""
    scales = dict.fromkeys(("dq", "p_k", "dk", "p_q", "dv", "dp", "p_dp", "o", "s"), 0.0)
    grads = _backward(q, k, v, do, scales, causal, window, alibi_slopes, softcap, scale)
    tau = abs(scale_of(q, scale))
    sums = {name: np.abs(np.asarray(x, np.float64)).sum(axis=-2) for name, x in (("q", q), ("k", k), ("do", do))}
    scales["q_sum"] = tau * _largest_group_sum(k, sums["q"])
    scales["k_sum"] = tau * float(sums["k"].max(initial=0.0))
    scales["do_sum"] = _largest_group_sum(k, sums["do"])
    return grads, scales


def _largest_group_sum(kv: np.ndarray, per_head: np.ndarray) -> float:
    """The largest entry of a per-query-head sum (…, Hq, d) once summed over each GQA group (…, Hkv, d)."""
    if per_head.ndim >= 2 and kv.ndim >= 3 and per_head.shape[-2] != kv.shape[-3]:
        per_head = per_head.reshape(*per_head.shape[:-2], kv.shape[-3], -1, per_head.shape[-1]).sum(axis=-2)
    return float(per_head.max(initial=0.0))


def _backward(q, k, v, do, scales, causal, window, alibi_slopes, softcap, scale):
    """The chain rule a block of query rows at a time; with `scales` (a dict), their magnitudes too."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    kr, vr = _repeat(q, k), _repeat(q, v)
    tau = scale_of(q, scale)
    dq, dk, dv = np.empty(q.shape), np.zeros(kr.shape), np.zeros(kr.shape)
    if scales is not None:
        vT_abs = np.abs(np.swapaxes(vr, -1, -2))
        k_abs, acc = np.abs(kr), {name: np.zeros(kr.shape) for name in ("dk", "p_q", "dv")}
    for r0, r1 in row_blocks(q.shape[-2], k.shape[-2], int(np.prod(q.shape[:-2], dtype=np.int64))):
        p, _, t, s_max = _probabilities(q, kr, r0, r1, causal, window, alibi_slopes, softcap, scale)
        do_r = do[..., r0:r1, :]
        dv += np.swapaxes(p, -1, -2) @ do_r
        dp = do_r @ np.swapaxes(vr, -1, -2)
        dp_d = dp - (p * dp).sum(axis=-1, keepdims=True)
        ds = p * dp_d
        if softcap is not None:
            ds *= 1 - t**2  # d(c·tanh(x/c))/dx
        dq[..., r0:r1, :] = tau * ds @ kr
        dk += tau * np.swapaxes(ds, -1, -2) @ q[..., r0:r1, :]
        if scales is not None:
            ds_abs, q_abs, pT = np.abs(p * dp_d), np.abs(q[..., r0:r1, :]), np.swapaxes(p, -1, -2)
            scales["dq"] = max(scales["dq"], abs(tau) * float((ds_abs @ k_abs).max(initial=0.0)))
            scales["p_k"] = max(scales["p_k"], abs(tau) * float((p @ k_abs).max(initial=0.0)))
            scales["dp"] = max(scales["dp"], float((np.abs(do_r) @ vT_abs).max(initial=0.0)))
            scales["p_dp"] = max(scales["p_dp"], float((p * np.abs(dp)).sum(axis=-1).max(initial=0.0)))
            scales["o"] = max(scales["o"], float(np.abs(p @ vr).max(initial=0.0)))
            scales["s"] = max(scales["s"], s_max)
            acc["dk"] += abs(tau) * np.swapaxes(ds_abs, -1, -2) @ q_abs  # magnitudes: |τ| (a negative τ made them 0)
            acc["p_q"] += abs(tau) * pT @ q_abs
            acc["dv"] += pT @ np.abs(do_r)
    if scales is not None:
        for name, a in acc.items():
            scales[name] = max(scales[name], float(_group_sum(k, a).max(initial=0.0)))
    return dq, _group_sum(k, dk), _group_sum(k, dv)


def varlen_backward_scales(q, k, v, do, cu_seqlens_q, cu_seqlens_k, **options):
    """`varlen_backward`'s gradients and `backward_scales`' magnitudes, the largest over the sequences."""
    grads, scales = [np.empty(np.shape(x)) for x in (q, k, v)], {}
    for a0, a1, b0, b1 in zip(cu_seqlens_q[:-1], cu_seqlens_q[1:], cu_seqlens_k[:-1], cu_seqlens_k[1:], strict=True):
        q_b, do_b = (np.swapaxes(np.asarray(x)[a0:a1], 0, 1) for x in (q, do))
        k_b, v_b = (np.swapaxes(np.asarray(x)[b0:b1], 0, 1) for x in (k, v))
        (dq, dk, dv), part = backward_scales(q_b, k_b, v_b, do_b, **options)
        grads[0][a0:a1], grads[1][b0:b1], grads[2][b0:b1] = (np.swapaxes(g, 0, 1) for g in (dq, dk, dv))
        scales = {name: max(scales.get(name, 0.0), x) for name, x in part.items()}
    return tuple(grads), scales


def score_max(q, k, *, causal=False, window=None, alibi_slopes=None, softcap=None, scale=None) -> float:
    """max|S| over every head and score (after a softcap and ALiBi, before the mask), as standard attention's
    stored S holds them (`sim.api.tolerance`); q (…, Hq, N, d), k (…, Hkv, Nk, d), or packed sequences through
    `varlen_score_max`."""
    q, k = (np.asarray(x, dtype=np.float64) for x in (q, k))
    kr = _repeat(q, k)
    blocks = row_blocks(q.shape[-2], k.shape[-2], int(np.prod(q.shape[:-2], dtype=np.int64)))
    return max((_probabilities(q, kr, r0, r1, causal, window, alibi_slopes, softcap, scale)[3] for r0, r1 in blocks),
               default=0.0)  # fmt: skip


def varlen_score_max(q, k, cu_seqlens_q, cu_seqlens_k, **options) -> float:
    """`score_max` of packed sequences, as `varlen` packs them."""
    bounds = zip(cu_seqlens_q[:-1], cu_seqlens_q[1:], cu_seqlens_k[:-1], cu_seqlens_k[1:], strict=True)
    return max((score_max(np.swapaxes(np.asarray(q)[a0:a1], 0, 1), np.swapaxes(np.asarray(k)[b0:b1], 0, 1), **options)
                for a0, a1, b0, b1 in bounds), default=0.0)  # fmt: skip


def varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **options):
    """(o, lse) of packed sequences: q (total_q, Hq, d), k, v (total_k, Hkv, d); sequence b is rows
    cu_seqlens_q[b] … cu_seqlens_q[b + 1] − 1 against keys cu_seqlens_k[b] …; lse is (total_q, Hq)."""
    o, lse = np.empty(np.shape(q)), np.empty(np.shape(q)[:-1])
    for a0, a1, b0, b1 in zip(cu_seqlens_q[:-1], cu_seqlens_q[1:], cu_seqlens_k[:-1], cu_seqlens_k[1:], strict=True):
        heads_first = (np.swapaxes(np.asarray(x)[s0:s1], 0, 1) for x, s0, s1 in ((q, a0, a1), (k, b0, b1), (v, b0, b1)))
        ob, lb = attention(*heads_first, **options)
        o[a0:a1], lse[a0:a1] = np.swapaxes(ob, 0, 1), lb.T
    return o, lse


def varlen_backward(q, k, v, do, cu_seqlens_q, cu_seqlens_k, **options):
    """(dq, dk, dv) in float64 of packed sequences, as `varlen` packs them: dq like q, dk and dv like k, v."""
    grads = [np.empty(np.shape(x)) for x in (q, k, v)]
    for a0, a1, b0, b1 in zip(cu_seqlens_q[:-1], cu_seqlens_q[1:], cu_seqlens_k[:-1], cu_seqlens_k[1:], strict=True):
        rows = ((x, a0, a1) for x in (q, do))
        q_b, do_b = (np.swapaxes(np.asarray(x)[s0:s1], 0, 1) for x, s0, s1 in rows)
        k_b, v_b = (np.swapaxes(np.asarray(x)[b0:b1], 0, 1) for x in (k, v))
        dq, dk, dv = attention_backward(q_b, k_b, v_b, do_b, **options)
        grads[0][a0:a1], grads[1][b0:b1], grads[2][b0:b1] = (np.swapaxes(g, 0, 1) for g in (dq, dk, dv))
    return tuple(grads)


def paged(q, k_cache, v_cache, block_table, cache_seqlens, **options):
    """(o, lse) of q (B, Hq, Nq, d) against a paged cache (num_pages, page_size, Hkv, d): sequence b's keys are
    the first cache_seqlens[b] rows of its pages block_table[b, 0], block_table[b, 1], … in that order."""
    q = np.asarray(q, dtype=np.float64)
    o, lse = np.empty(q.shape), np.empty(q.shape[:-1])
    for b, n in enumerate(cache_seqlens):
        k, v = (np.asarray(c)[np.asarray(block_table[b])].reshape(-1, *np.shape(c)[2:])[:n] for c in (k_cache, v_cache))
        o[b], lse[b] = attention(q[b], np.swapaxes(k, 0, 1), np.swapaxes(v, 0, 1), **options)
    return o, lse


def probabilities(q, k, *, causal=False, window=None, scale=None) -> np.ndarray:
    """P = softmax(τ q kᵀ) in float64 for q (N, d), k (Nk, d): (N, Nk), 0 where the mask hides a key."""
    q, k = (np.asarray(x, dtype=np.float64) for x in (q, k))
    return _probabilities(q, k, 0, q.shape[-2], causal, window, None, None, scale)[0]


def _probabilities(q, k, r0, r1, causal, window, alibi_slopes, softcap, scale):
    """P (…, rows, Nk), lse (…, rows), tanh(τ q·k / c) (None without a softcap) and max|S| (before the mask) of
    query rows r0 … r1 − 1."""
    N, Nk = q.shape[-2], k.shape[-2]
    s = scale_of(q, scale) * q[..., r0:r1, :] @ np.swapaxes(k, -1, -2)
    t = None
    if softcap is not None:
        t = np.tanh(s / softcap)
        s = softcap * t
    i = np.arange(r0, r1)[:, None] + Nk - N  # each query's diagonal key
    j = np.arange(Nk)[None, :]
    if alibi_slopes is not None:
        slopes = np.asarray(alibi_slopes, dtype=np.float64)  # (Hq,) or (B, Hq)
        s = s - slopes.reshape(*slopes.shape, 1, 1) * np.abs(i - j)
    s_max = float(np.abs(s).max(initial=0.0))
    left, right = (-1, -1) if window is None else (-1 if w is None else w for w in window)
    seen = np.ones((r1 - r0, Nk), bool)
    if causal:
        seen &= j <= i
    if left != -1:
        seen &= j >= i - left
    if right != -1:
        seen &= j <= i + right
    s = np.where(seen, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m[np.isneginf(m)] = 0.0
    e = np.exp(s - m)
    ℓ = e.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(ℓ > 0, e / ℓ, 0.0)
        lse = np.where(ℓ[..., 0] > 0, m[..., 0] + np.log(ℓ[..., 0]), -np.inf)
    return p, lse, t, s_max


def _repeat(q: np.ndarray, kv: np.ndarray) -> np.ndarray:
    """K or V repeated over each GQA group: head h of q reads head h // g."""
    if q.ndim < 3 or q.shape[-3] == kv.shape[-3]:
        return kv
    return np.repeat(kv, q.shape[-3] // kv.shape[-3], axis=-3)


def _group_sum(kv: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """A gradient per query head (…, Hq, Nk, d) summed over each group into kv's shape (…, Hkv, Nk, d)."""
    if grad.shape == kv.shape:
        return grad
    Hkv = kv.shape[-3]
    return grad.reshape(*kv.shape[:-3], Hkv, grad.shape[-3] // Hkv, *kv.shape[-2:]).sum(axis=-3)
