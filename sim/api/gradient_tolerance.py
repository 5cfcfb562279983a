"""How far a simulated gradient dQ, dK, dV may be from the float64 reference: the bound `flashsim run --backward`
prints and its verdict compares each max|g − ref| with.

The reference is the chain rule in float64 on the inputs as stored (q, k, v, dO): dV = Pᵀ dO, dP = dO Vᵀ,
D_i = rowsum(P_i ∘ dP_i), dS = P ∘ (dP − D) (∘ (1 − T²) through a softcap, T = tanh(τ q·k / c)), dQ = τ dS K,
dK = τ dSᵀ Q, dK and dV summed over each GQA group. The bound covers what the backward listing rounds, and what
the forward handed it: O within the forward's own bound F (`sim.api.tolerance`, which the run's forward verdict
holds it to) and its statistics (ℓ, m or L) in float32. Notation as there: w = 2⁻²⁴, u the storage dtype's unit
roundoff, γ(n) = n·w / (1 − n·w), σ the scores' scale (plus max|bias| under ALiBi), E_f the forward's weight error
(`tolerance.weight_error`), B_f, T_f its Bc and ⌈Nk/Bc⌉; Br, Bc the backward's blocks, Tr = ⌈R/Br⌉ for the R rows
a program holds (N, or g·N in GQA's packed schedule), Tc = ⌈Nk/Bc⌉. The magnitudes |dS||K|, P|K|, … are the
reference's own (`reference_variants.backward_scales`, the largest element over every head), as max|ref| is
the forward's: a rounding is relative to the terms it sums, not to the sum.

1. P. FlashAttention rebuilds P̂_ij = P_ij·e^ε. Its scores Ŝ are off by e_S = γ(d+1)·σ, plus 4w·σ through a
   softcap (÷c, tanh, ·c) and 3w·σ under ALiBi (its float32 slope, the product, the subtraction); E_f gains the
   same. The forward's ℓ̂ sums weights each within e^(±E_f) of the exact one, in a chain of B_f + T_f additions,
   so m̂ + ln ℓ̂ is within E_f + 2γ(B_f + T_f) of L. Log, m + log ℓ, S − L or S − m, exp and ÷ℓ round by at most
   w·(5σ + 4 ln Nk + 6) together (|S| ≤ σ, |L| ≤ σ + ln Nk + 1). So |ε| ≤ E_P = e_S + E_f + 2γ(B_f + T_f) +
   w·(5σ + 4 ln Nk + 6). Standard attention reads the P its forward stored: e^ε over e^ε's row sum (Nk terms),
   ÷ and the store: E_P = 2E_f + 2γ(Nk) + w (E_f holds S's and P's storage roundings). Entrywise
   |P̂ − P| ≤ η·P, η = e^(E_P) − 1 (+ TINY where standard attention stores P: below the storage dtype's normal
   range a store rounds by up to TINY, half its smallest subnormal, absolutely); masked P is 0 exactly. Where
   η ≥ 2 no bound is stated: every P̂ may be off by twice itself, and the bounds would pass any gradient.
2. dP and D. dP̂ = fl(dO_i·V_j): |dP̂ − dP| ≤ δdP = γ(d)·|dO||V|ᵀ (and u·(1 + γ(d)) more where standard attention
   stores dP, + TINY). FlashAttention's D̂_i = fl(Σ_t dO_it·Ô_it) with |Ô − O| ≤ F: δD = ‖dO_i‖₁·F + γ(d+1)·‖dO_i‖₁·
   (max|O| + F); standard attention's D̂_i = fl(Σ_j P̂_ij·dP̂_ij) over Nk terms (Σ_j P_ij = 1):
   δD = η·(Σ_j P_ij|dP_ij| + δdP) + δdP + γ(Nk+1)·(1 + η)·(Σ_j P_ij|dP_ij| + δdP) + Nk·TINY·(max|dP| + δdP)·
   (1 + γ(Nk+1)) (P̂'s TINY). So dP̂ − D̂ is within Δ = δdP + δD of dP − D.
3. dS. dŜ = P̂·(dP̂ − D̂)·(1 + θ), |θ| ≤ r = 3w (a subtraction and a product; + u·(1 + 3w) where standard
   attention stores dS); entrywise, with the exact dS_ij = P_ij·(dP_ij − D_i),
     |dŜ_ij − dS_ij| ≤ η·P·(|dP − D| + Δ)·(1 + r) + P·Δ·(1 + r) + P·|dP − D|·r = a·|dS_ij| + b·P_ij,
   a = η·(1 + r) + r, b = Δ·(1 + η)·(1 + r); standard attention adds c = TINY·(max|dP| + max_i Σ_j P_ij|dP_ij| + Δ)·
   (1 + r) + TINY (P̂'s TINY times |dP̂ − D̂|, and dS's own store), each entry (helper 114: N = 1 against 20,000
   keys, every dS subnormal in fp16, dK off by 1.5× the bound that lacked it). Through a softcap dS ∘ (1 − T²): 1 − T̂² is within
   t = 2δT + δT² + 3w of 1 − T² (δT = (γ(d+1) + w)·σ/c + 2w), one more product, |1 − T²| ≤ 1:
   a ← a·(1 + t)·(1 + 2w) + t·(1 + 2w) + 2w, b, c ← b, c·(1 + t)·(1 + 2w), |dS| taken before the softcap.
4. The sums. A gradient is a float32 sum of terms in a chain of n additions (a tile's matmul, then one per tile,
   one for τ·): its error is the terms' errors plus γ(n) times their magnitudes (Higham):
     dV  η·Pᵀ|dO| + T·1ᵀ|dO| + γ(Br + Tr)·((1 + η)·Pᵀ|dO| + T·1ᵀ|dO|)      (T = TINY for standard attention, else 0)
     dK  a·τ|dS|ᵀ|Q| + b·τPᵀ|Q| + c·τ1ᵀ|Q| + γ(Br + Tr + 1)·((1 + a)·τ|dS|ᵀ|Q| + b·τPᵀ|Q| + c·τ1ᵀ|Q|)
     dQ  a·τ|dS||K| + b·τP|K| + c·τ1|K| + γ(Bc + Tc + 1)·Z′, Z′ = (1 + a)·τ|dS||K| + b·τP|K| + c·τ1|K|
         (1: all ones, the sums over every row or key); FlashAttention writes dQ_i
         back in the storage dtype after each of its Tc tiles, each partial sum ≤ (1 + u)^Tc·(1 + γ)·Z′ = Z:
         + Tc·u·Z.
5. The stores. Each gradient stored once (dQ of standard attention too) rounds u·(max|ref| + error), plus
   TINY (half the dtype's smallest subnormal: below its normal range a store rounds by that much, absolutely;
   each of step 4's Tc stores of dQ_i too). GQA's per-head
   schedule stores each head's dK_h, dV_h (u of their magnitudes, the group's summed), sums them in float32
   (γ(g)) and stores the sum: (u + γ(g)·(1 + u))·(magnitude + error) before that last store. An entry whose
   exact value is within the bound of the dtype's rounding to ±inf (|ref| + bound ≥ its largest finite value
   plus half an ulp: 65,520 in fp16) and which is stored as that ±inf is counted apart, as rounding made it.

These are worst-case bounds, as the forward's: a correct listing never exceeds them; a wrong gradient (a lost τ,
a lost 1/ℓ, dK for dV, a wrong mask) is off by about its own size, far outside. No bound is stated under
dropout (its mask's rows are not modelled here).
"""

from math import ceil, expm1, inf, log

import numpy as np

from sim.api import reference_variants
from sim.api.results import Gradients
from sim.api.tolerance import LARGEST, TINY, U, W, gamma, score_rounding, score_scale, weight_error

GRADIENTS = ("dq", "dk", "dv")
NOTES = ("past_range", "no_bound")  # what `check` may add: entries stored as ±inf, counted; why no bound is stated
OVERFLOW = {dtype: top * (1 + U[dtype] / (2 - 2 * U[dtype])) for dtype, top in LARGEST.items()}  # fp16: 65,520,
# the largest finite value plus half its ulp: from there a store rounds to ±inf
FLOAT32_NORMAL = 2.0**-126  # below it the float32 arithmetic the bound's w models is not relative: no bound stated
FORMULA = (
    "P (rebuilt from the forward's statistics, or stored), dP, D (from O within the forward's bound) and dS "
    "rounded, carried through each gradient's float32 sums and stores (sim.api.gradient_tolerance)"
)


def gradient_tolerance(
    algorithm: str, dtype: str, *, d: int, nk: int, rows: int, forward_block_cols: int, block_rows: int,
    block_cols: int, sigma: float, s_max: float, forward_bound: float, o_max: float, do_l1: float, scales: dict,
    ref_max: dict, group: int = 1, packed: bool = False, softcap: float | None = None, alibi: bool = False,
) -> dict[str, float]:  # fmt: skip
    """The bounds on max|dq − ref|, max|dk − ref|, max|dv − ref| (the module's steps 1–5) for `algorithm`
    ("standard", "flash1", "flash2") storing in `dtype`: `rows` a program's query rows (N, or g·N packed), `scales`
    `reference_variants.backward_scales`' magnitudes, `ref_max` the reference gradients' max|·|, `do_l1` the
    largest ‖dO_i‖₁, `forward_bound` F and `o_max` max|O| of the forward, `s_max` its max|S| (standard)."""
    u = U[dtype]
    Tr, Tc, Tf = ceil(rows / block_rows), ceil(nk / block_cols), ceil(nk / forward_block_cols)
    e_S = gamma(d + 1) * sigma + score_rounding(sigma, softcap is not None, alibi)
    E_f = weight_error(algorithm, dtype, d=d, nk=nk, block_cols=forward_block_cols, sigma=sigma, s_max=s_max,
                       softcap=softcap is not None, alibi=alibi)  # fmt: skip
    standard = algorithm == "standard"
    if standard:
        E_P = 2 * E_f + 2 * gamma(nk) + W
    else:
        E_P = e_S + E_f + 2 * gamma(forward_block_cols + Tf) + W * (5 * sigma + 4 * log(max(nk, 1)) + 6)
    if E_P >= log(3):  # η ≥ 2: every P̂ may be off by twice itself, the bound above the gradients: none stated
        return dict.fromkeys(GRADIENTS, inf)
    eta = expm1(E_P)
    tiny = TINY[dtype]
    stored = tiny if standard else 0.0  # standard attention's P, dP and dS in HBM: TINY each below the normal range
    dp = scales["dp"]
    dP_err = gamma(d) * dp + (u * (1 + gamma(d)) * dp + stored if standard else 0.0)
    if standard:
        p_dp = scales["p_dp"]
        D_err = eta * (p_dp + dP_err) + dP_err + gamma(nk + 1) * (1 + eta) * (p_dp + dP_err)
        D_err += nk * stored * (dp + dP_err) * (1 + gamma(nk + 1))  # P̂'s TINY times each |dP̂_ij|
    else:
        D_err = do_l1 * forward_bound + gamma(d + 1) * do_l1 * (o_max + forward_bound)
    delta = dP_err + D_err
    r = 3 * W + (u * (1 + 3 * W) if standard else 0.0)
    a, b = eta * (1 + r) + r, delta * (1 + eta) * (1 + r)
    c = stored * (dp + scales["p_dp"] + delta) * (1 + r) + stored  # P̂'s TINY times |dP̂ − D̂|; dS's own store
    if softcap is not None:
        dT = (gamma(d + 1) + W) * sigma / softcap + 2 * W
        t = 2 * dT + dT * dT + 3 * W
        a, b = a * (1 + t) * (1 + 2 * W) + t * (1 + 2 * W) + 2 * W, b * (1 + t) * (1 + 2 * W)
        c *= (1 + t) * (1 + 2 * W)
    dv_terms = (1 + eta) * scales["dv"] + stored * scales["do_sum"]
    dk_terms = (1 + a) * scales["dk"] + b * scales["p_q"] + c * scales["q_sum"]
    dq_terms = (1 + a) * scales["dq"] + b * scales["p_k"] + c * scales["k_sum"]
    err = {
        "dv": eta * scales["dv"] + stored * scales["do_sum"] + gamma(block_rows + Tr) * dv_terms,
        "dk": a * scales["dk"] + b * scales["p_q"] + c * scales["q_sum"] + gamma(block_rows + Tr + 1) * dk_terms,
        "dq": a * scales["dq"] + b * scales["p_k"] + c * scales["k_sum"] + gamma(block_cols + Tc + 1) * dq_terms,
    }
    if not standard:  # dQ_i written back in the storage dtype after each tile
        err["dq"] += Tc * (u * (1 + u) ** Tc * (1 + gamma(block_cols + Tc + 1)) * dq_terms + tiny)
    if group > 1 and not packed:  # each head's dK_h, dV_h stored, then summed over the group
        for name, terms in (("dk", dk_terms), ("dv", dv_terms)):
            err[name] += (u + gamma(group) * (1 + u)) * (terms + err[name]) + group * tiny  # g stores (red team 90)
    stored = ("dk", "dv") if not standard else GRADIENTS
    return {name: err[name] + (u * (ref_max[name] + err[name]) + tiny if name in stored else 0.0) for name in GRADIENTS}


def check(
    grads: Gradients, q, k, v, do, *, forward_bound: float | None, forward_block_cols: int, window=None,
    alibi_slopes=None, softcap: float | None = None, cu_seqlens=None, pack_gqa: bool = False,
) -> dict:  # fmt: skip
    """max|g − float64 reference| of dq, dk, dv, and (`tolerance`) each one's bound and whether all three lie
    within them; `tolerance` None where no bound is stated (no forward bound, dropout, an algorithm without
    a derivation, scores so large that e^(E_P) is past float64, or |τ| below float32's normal range). q (B, Hq, N, d), k, v (B, Hkv, Nk, d); with `cu_seqlens` packed sequences (total, H, d)."""
    definition = dict(causal=grads.causal, scale=grads.scale, window=window, alibi_slopes=alibi_slopes,
                      softcap=softcap)  # fmt: skip
    if cu_seqlens is None:
        refs, scales = reference_variants.backward_scales(q, k, v, do, **definition)
        n, nk, group = q.shape[-2], k.shape[-2], q.shape[-3] // k.shape[-3] if q.ndim > 2 else 1
    else:
        refs, scales = reference_variants.varlen_backward_scales(q, k, v, do, cu_seqlens, cu_seqlens, **definition)
        n = nk = int(np.diff(cu_seqlens).max(initial=0))
        group = q.shape[-2] // k.shape[-2]
    got = dict(zip(GRADIENTS, (grads.dq, grads.dk, grads.dv), strict=True))
    want = dict(zip(GRADIENTS, refs, strict=True))
    errors = {name: max_abs(got[name].astype(np.float64) - want[name]) for name in GRADIENTS}
    out = {"max_abs_err": errors, "tolerance": None}
    tau = abs(grads.scale if grads.scale is not None else q.shape[-1] ** -0.5)
    unbounded = [
        (0 < tau < FLOAT32_NORMAL, "τ below float32's normal range"),  # the chip's arithmetic underflows on τ itself
        (forward_bound in (None, inf), "the forward has none"),
        (grads.dropout_p > 0, "dropout's mask is not modelled"),
        (grads.algorithm not in ("standard", "flash1", "flash2"), f"none is derived for {grads.algorithm}"),
    ]
    for applies, why in unbounded:
        if applies:
            return out | {"no_bound": why}
    sigma = score_scale(q, k, grads.scale)
    if alibi_slopes is not None:  # the bias adds to |S|, as the forward's bound takes it
        sigma += max_abs(alibi_slopes) * max(n, nk)
    bounds = gradient_tolerance(
        grads.algorithm, grads.dtype, d=q.shape[-1], nk=nk, rows=n * (group if pack_gqa else 1),
        forward_block_cols=forward_block_cols, block_rows=grads.block_rows, block_cols=grads.block_cols,
        sigma=sigma, s_max=scales["s"], forward_bound=forward_bound, o_max=scales["o"],
        do_l1=float(np.abs(np.asarray(do, np.float64)).sum(-1).max(initial=0.0)), scales=scales,
        ref_max={name: max_abs(r) for name, r in want.items()}, group=group, packed=pack_gqa, softcap=softcap,
        alibi=alibi_slopes is not None,
    )  # fmt: skip
    if inf in bounds.values():  # no bound at this score scale: compared with float64, no verdict
        return out | {"no_bound": f"at score scale σ = {sigma:.3g} the rounding may move every P by twice itself"}
    for name in GRADIENTS:  # an exact gradient past the dtype's range is stored as ±inf, as rounding it must be
        past = _rounded_past_range(got[name], want[name], bounds[name], grads.dtype)
        if past.any():
            errors[name] = max_abs((got[name].astype(np.float64) - want[name])[~past])
            out.setdefault("past_range", {})[name] = int(past.sum())
    within = {name: bool(errors[name] <= bounds[name]) for name in GRADIENTS}
    out["tolerance"] = {"formula": FORMULA, "bound": bounds, "within": all(within.values()), "each": within}
    return out


def _rounded_past_range(got: np.ndarray, want: np.ndarray, bound: float, dtype: str) -> np.ndarray:
    """Where `got` is ±inf as a store of a value within `bound` of the exact `want` may round (helper 114: tied fp16
    keys at --scale 5000 make an exact |dK| of 75,178, which fp16 holds only as inf)."""
    reach = np.abs(want) + bound >= OVERFLOW[dtype]
    return np.isinf(got) & (np.sign(got) == np.sign(want)) & reach


def max_abs(x) -> float:
    """max|x| in float64 (0 for an empty array)."""
    return float(np.abs(np.asarray(x, np.float64)).max(initial=0.0))
