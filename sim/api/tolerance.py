"""How far a simulated output may be from the float64 reference: one bound, the number `flashsim run` prints and
the number its verdict compares max|O − ref| with (the README's "How exact is it?").

The reference is exact softmax(τ q kᵀ) v in float64 on the inputs as stored, so the bound covers what the
algorithm rounds. Notation: w = 2⁻²⁴ (float32, the on-chip arithmetic), u the storage dtype's unit roundoff
(fp32 2⁻²⁴, fp16 2⁻¹¹, bf16 2⁻⁸), γ(n) = n·w / (1 − n·w) (Higham's bound on a float32 sum of n terms),
Tc = ⌈Nk/Bc⌉, and σ = τ·max_i ‖q_i‖·max_j ‖k_j‖ the scale of the scores: by Cauchy–Schwarz it bounds
τ·Σ_t |q_it|·|k_jt|, what a float32 dot product's rounding is relative to (not |S|, which can be far smaller).

1. Logits: Ŝ_ij = fl(τ·fl(q_i·k_j)) is off by at most γ(d+1)·σ (Higham, Thm 3.1). The exponent S − m is
   formed with one more rounding (≤ w·|S − m| ≤ 2w·σ); a rescale e^(m_old − m_new) adds the same on its
   difference, and those differences sum to at most 2σ along a row (m only grows); each exp (float64's rounded
   to float32, `sim.machine.memory.rounded_exp`: within one ulp, 2w) and each rescaling product adds 3w, at most Tc + 1 times. So each weight e^(S−m)
   is the exact one times e^ε with |ε| ≤ E = γ(d+1)·σ + 4w·σ + 3(Tc + 1)·w. Standard attention also stores
   S and P in the storage dtype: E grows by u·(max|S| + γ(d+1)·σ) + TINY and by 2u (P's rounding, |ln(1 ± u)|
   ≤ 2u), where TINY is half the dtype's smallest subnormal: a store below its normal range rounds by up to
   that, absolutely (a stored P below it: Nk·TINY·max|V| more in step 3's A).
2. Normalized weights p̂ = e^ε·p / Σ e^ε·p then differ from p by Σ_j |p̂_j − p_j| ≤ ρ = e^(2E) − 1. Where ρ
   reaches 2 + u no bound is stated: both sum to about 1, so the bound would be 2·max|V| or more, which any
   weighted mix of V's rows — right or wrong — meets (helper 114: ✓ against 4.80 at --scale 1e36).
3. Accumulating ℓ and Σ p̂·v in float32 and dividing: 2γ(L)/(1 − γ(L)) + 2w relative to max|V| (Σ p̂|v| ≤
   ℓ·max|V|), where L is the longest chain of additions: a tile's sum of Bc terms, then one per tile, L = Bc + Tc
   (standard attention sums each row of P whole: L = max(Nk, Bc + Tc)); past γ(L) ≥ 1 no bound is stated (∞).
   So the float32 result is within A = (ρ + 2γ(L)/(1 − γ(L)) + 2w)·max|V| of the reference.
4. Storing O: FlashAttention-2 and standard attention round it once, u·(max|ref| + A); Algorithm 1 stores the
   normalized O_i (≤ max|V|·(1 + ρ)) each of its Tc passes and rescales it by weights ≤ 1 afterwards,
   Tc·(u·(1 + ρ)·max|V| + TINY). Each store adds TINY (below the normal range).
5. Ring attention (`sim.ring`) runs FlashAttention-2 on each device's shard and merges the partials by ⊕: each
   merge is one more rescale (E gains 3(Tc + 1)·w, L becomes Bc + 2·Tc), and each partial O_t is stored once
   before the merge, its rounding ≤ u·max|V| however the ⊕ weights (summing to 1) mix them: u·max|ref| +
   (1 + u)·(A + u·max|V|). ALiBi's bias adds to the scores' scale: a caller passes σ + max|bias|.
6. The scores' own arithmetic past the dot product: a softcap c·tanh(S/c) rounds three more times and tanh's
   within an ulp, 4w·σ; ALiBi's float32 slope, product and subtraction, 3w·σ. E gains them, as the backward's
   does (`sim.api.gradient_tolerance`, step 1: `score_rounding`).

These are worst-case bounds: on random inputs the error is typically 10²–10³ times smaller, but a correct
algorithm can never exceed them, at any scale. The grader keeps its own stricter acceptance bounds (below).
"""

import math
from dataclasses import dataclass
from math import ceil, expm1

import numpy as np

W = 2.0**-24  # float32 unit roundoff: the on-chip arithmetic
U = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}  # unit roundoff of each storage dtype
LARGEST = {"fp32": 3.4028234663852886e38, "fp16": 65504.0, "bf16": 3.3895313892515355e38}  # past it: ±inf
TINY = {"fp32": 2.0**-150, "fp16": 2.0**-25, "bf16": 2.0**-134}  # half the smallest subnormal: what a store rounds
# by below the dtype's normal range, where u·|x| no longer bounds it (fp16 below 6.1e-5: red team 87's --scale 1e-6)
FORMULAS = {
    "flash2": "u·max|ref| + (1 + u)·A",
    "flash1": "A + Tc·u·(1 + ρ)·max|V|",
    "standard": "u·max|ref| + (1 + u)·A",
    "ring": "u·max|ref| + (1 + u)·(A + u·max|V|)",
}
EXPLAIN = "A: float32 arithmetic at score scale σ = τ·max‖q‖·max‖k‖ (sim.api.tolerance)"


@dataclass(frozen=True)
class Tolerance:
    """The bound on max|o − ref| over every element, and the formula it came from."""

    bound: float
    formula: str


def stated(algorithm: str) -> bool:
    """Whether a bound is derived for `algorithm` (a newly registered one has none until it is)."""
    return algorithm in FORMULAS


def gamma(n: int) -> float:
    """γ(n) = n·w / (1 − n·w): the relative error of a float32 sum of n terms (∞ past 1/w terms)."""
    return n * W / (1 - n * W) if n * W < 1 else float("inf")


def score_scale(q: np.ndarray, k: np.ndarray, scale: float) -> float:
    """σ = τ·max‖q_i‖·max‖k_j‖ over the stored inputs (…, N, d) and (…, Nk, d), in float64."""
    norm = lambda x: float(np.sqrt(np.square(np.asarray(x, np.float64)).sum(-1)).max(initial=0.0))  # noqa: E731
    return abs(scale) * norm(q) * norm(k)


def score_rounding(sigma: float, softcap: bool = False, alibi: bool = False) -> float:
    """Step 6: what a softcap (4w·σ) and ALiBi (3w·σ) add to the scores' error past the dot product."""
    return (4 * W * sigma if softcap else 0.0) + (3 * W * sigma if alibi else 0.0)


def weight_error(
    algorithm: str, dtype: str, *, d: int, nk: int, block_cols: int, sigma: float, s_max: float = 0.0,
    softcap: bool = False, alibi: bool = False,
) -> float:  # fmt: skip
    """E of step 1 (and 6): each weight e^(S−m) the forward computes is the exact one times e^ε, |ε| ≤ E."""
    u, Tc = U[dtype], ceil(nk / block_cols)
    E = gamma(d + 1) * sigma + 4 * W * sigma + 3 * (Tc + 1) * W + score_rounding(sigma, softcap, alibi)
    if algorithm == "ring":  # each device's partial merged by ⊕: one more rescale per block at most
        E += 3 * (Tc + 1) * W
    if algorithm == "standard":  # S and P stored in the storage dtype
        E += u * (s_max + gamma(d + 1) * sigma) + TINY[dtype] + 2 * u
    return E


def tolerance(
    algorithm: str, dtype: str, *, d: int, nk: int, block_cols: int, sigma: float, v_max: float, ref_max: float,
    s_max: float = 0.0, softcap: bool = False, alibi: bool = False,
) -> Tolerance:  # fmt: skip
    """The bound for `algorithm` storing in `dtype`: head dimension d, Nk keys in blocks of Bc, score scale σ
    (`score_scale`), max|V|, max|ref| and max|S| (for standard attention's stored S) over the heads compared; a
    softcap's and ALiBi's rounding of the scores (step 6)."""
    if not stated(algorithm):
        raise KeyError(f"no tolerance is derived for {algorithm!r}")
    u, Tc = U[dtype], ceil(nk / block_cols)
    if algorithm == "standard" and s_max + gamma(d + 1) * sigma >= LARGEST[dtype]:
        return Tolerance(math.inf, f"no bound: S past {dtype}'s range")  # its stored S: ±inf, then NaN
    E = weight_error(algorithm, dtype, d=d, nk=nk, block_cols=block_cols, sigma=sigma, s_max=s_max, softcap=softcap,
                     alibi=alibi)  # fmt: skip
    if 2 * E >= math.log(3 + u):  # ρ at its cap: a bound of 2·max|V| or more, which any mix of V's rows meets
        return Tolerance(
            math.inf, f"no bound: at score scale σ = {sigma:.3g} the scores' rounding may move every weight"
        )
    rho = expm1(2 * E)
    g = gamma(
        max(nk, block_cols + Tc) if algorithm == "standard" else block_cols + (2 if algorithm == "ring" else 1) * Tc
    )
    A = (rho + (2 * g / (1 - g) if g < 1 else math.inf) + 2 * W) * v_max
    if algorithm == "standard":  # its stored P: below the normal range, TINY a weight, absolutely
        A += nk * TINY[dtype] * v_max
    tiny = TINY[dtype]
    if algorithm == "flash1":
        return Tolerance(A + Tc * (u * (1 + rho) * v_max + tiny), FORMULAS[algorithm])
    if algorithm == "ring":  # + each partial O_t stored once (≤ u·max|V|; the ⊕ weights sum to 1)
        return Tolerance(u * ref_max + (1 + u) * (A + u * v_max + tiny) + tiny, FORMULAS[algorithm])
    return Tolerance(u * ref_max + (1 + u) * A + tiny, FORMULAS[algorithm])


def decoding(result, q, k, v, ref: np.ndarray) -> Tolerance:
    """Flash-Decoding's bound (`sim.decode`'s `result` of q, k, v against `ref`): the ring's, step 5 — each split a
    FlashAttention-2 pass whose partial (O_p, lse_p) is stored once and merged by ⊕ (P ≤ Tc splits, so L = Bc + 2·Tc
    covers a split's chain and the combine's)."""
    return tolerance("ring", result.dtype, d=q.shape[-1], nk=result.nk, block_cols=result.block_cols, sigma=score_scale(q, k, result.scale),
                     v_max=float(np.abs(v.astype(np.float64)).max(initial=0.0)),
                     ref_max=float(np.abs(ref).max(initial=0.0)))  # fmt: skip


# The grader's acceptance bounds (`sim.grading.problem`): stricter than the worst case above, for its curated
# cases. FLOOR stands for step 3's float32 sums and division and fp32's store, below 1e-5 of the output's magnitude
# on them. Step 1's rounding of the scores is relative not to O but to the logits, so FLOOR cannot hold it:
# `score_error` adds it, per score rather than at σ. At logits in the hundreds it is what a correct float32 kernel
# errs by (red team 106: assignment 7's master, row 12 of its seed 1116928100 shared by two keys, p 0.66 and 0.34,
# whose exponents were off by +2.8·10⁻⁵ and −2.7·10⁻⁵, τ·Σ_t |q_it|·|k_jt| being 206 and 282: O[12, 11] off by
# 3.95·10⁻⁵ where FLOOR allowed 3.49·10⁻⁵).
FLOOR = 1e-5  # float32 arithmetic, relative to max|ref|
CHUNK = 1 << 22  # elements of the (rows, Nk, d) products `score_error` forms at a time


def output_bound(
    algorithm: str, dtype: str, ref: np.ndarray, v: np.ndarray, nk: int, block_cols: int, *, q=None, k=None, p=None,
    scale: float = 1.0,
) -> np.ndarray:  # fmt: skip
    """The grader's elementwise bound on |O − ref| of one head: u·|ref| + 1e-5·max|ref| (FlashAttention-2),
    Tc·u·max|V| + 1e-5·max|ref| (Algorithm 1); 1e-5·max|ref| for fp32; each plus `score_error` where q, k (the
    stored inputs) and P (float64, N × Nk) are given."""
    floor = FLOOR * float(np.abs(ref).max(initial=0.0))
    scores = 0.0 if p is None else score_error(q, k, v, ref, p, scale, nk, block_cols)
    if dtype == "fp32":
        return np.full(np.shape(ref), floor) + scores
    u = U[dtype]
    if algorithm == "flash1":
        v_max = float(np.abs(np.asarray(v, np.float64)).max(initial=0.0))
        return np.full(np.shape(ref), ceil(nk / block_cols) * u * v_max + floor) + scores
    return u * np.abs(ref) + floor + scores


def score_error(q, k, v, ref: np.ndarray, p: np.ndarray, scale: float, nk: int, block_cols: int) -> np.ndarray:
    """Step 1 per score, elementwise: how far the weights' rounding moves O_ic, for q (N, d), k, v (Nk, d), ref
    (N, d) and P = softmax(τ q kᵀ) (N, Nk, 0 where a key is hidden) in float64. Each weight is p_ij·e^(δ_ij)·c_i
    (c_i common to row i, cancelled by ℓ_i), with |δ_ij| ≤ D_ij = γ(d+1)·τ·Σ_t |q_it|·|k_jt| (fl(τ·fl(q_i·k_j)),
    Higham Thm 3.1) + 4w·(m_i − S_ij) (τ and log₂ e stored in float32 and multiplied, 3w on every score of the
    row: its part 3w·m_i is common; S − m formed, w) + 3(Tc + 1)·w (step 1's exps and rescales). As
    Σ_j p_ij·(v_j − O_i) = 0, Ô_i − O_i = Σ_j p_ij·(e^(δ_ij) − 1)·(v_j − O_i) / Σ_j p_ij·e^(δ_ij), and by Jensen
    the denominator is ≥ e^(−D̄_i), D̄_i = Σ_j p_ij·D_ij: |Ô_ic − O_ic| ≤ e^(D̄_i)·Σ_j p_ij·(e^(D_ij) − 1)·|v_jc − O_ic|,
    with m_i − S_ij = ln(max_j p_ij / p_ij)."""
    q, k, v, p = (np.asarray(x, np.float64) for x in (q, k, v, p))
    d, Tc = q.shape[-1], ceil(nk / block_cols)
    out = np.zeros(np.shape(ref))
    rows = max(1, CHUNK // max(1, p.shape[-1] * d))
    for r0 in range(0, len(p), rows):
        pr = p[r0 : r0 + rows]
        seen = pr > 0
        ln_p = np.log(pr, where=seen, out=np.zeros(pr.shape))  # a subnormal p: ln p ≥ −745, no overflow
        gap = np.where(seen, ln_p.max(axis=1, initial=-np.inf, where=seen)[:, None] - ln_p, 0.0)
        D = gamma(d + 1) * abs(scale) * (np.abs(q[r0 : r0 + rows]) @ np.abs(k).T) + 4 * W * gap + 3 * (Tc + 1) * W
        spread = np.abs(v[None, :, :] - ref[r0 : r0 + rows, None, :])  # |v_jc − O_ic|: (rows, Nk, d)
        weighted = np.einsum("ij,ijc->ic", np.where(seen, pr * np.expm1(D), 0.0), spread)
        out[r0 : r0 + rows] = np.exp((pr * D).sum(axis=1))[:, None] * weighted
    return out


def lse_bound(ref_lse: np.ndarray) -> float:
    """The bound on |lse − ref| over the rows that see some key (ref −∞ marks the others)."""
    seen = np.isfinite(ref_lse)
    return FLOOR * max(1.0, float(np.abs(ref_lse[seen]).max())) if seen.any() else 0.0


def gradient_bound(ref: np.ndarray) -> float:
    """The bound on |g − ref| for a gradient stored in fp32 (never 0: an all-zero gradient allows float32's tiny)."""
    return FLOOR * max(float(np.abs(ref).max(initial=0.0)), float(np.finfo(np.float32).tiny))
