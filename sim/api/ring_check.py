"""`sim.ring`'s result held to float64 attention from the definition: its output within the ring's bound
(`sim.api.tolerance`), its gradients each within `sim.api.gradient_tolerance`'s — the verdicts `flashsim ring`
prints."""

import numpy as np

from sim.api import gradient_tolerance, reference, reference_variants, tolerance
from sim.api.ring_result import Sharded


def output(result: Sharded, q, k, v) -> dict:
    """The output against float64 attention, within the ring's bound (`sim.api.tolerance`)."""
    ref, _ = reference.attention(q, k, v, causal=result.causal, scale=result.scale)
    tol = tolerance.tolerance(
        "ring", result.dtype, d=q.shape[-1], nk=k.shape[-2], block_cols=result.block_cols,
        sigma=tolerance.score_scale(q, k, result.scale), v_max=float(np.abs(v.astype(np.float64)).max()),
        ref_max=float(np.abs(ref).max()),
    )  # fmt: skip
    error = float(np.abs(result.output.astype(np.float64) - ref).max())
    return {"error": error, "bound": tol.bound, "within": error <= tol.bound, "formula": tol.formula}


def gradients(result: Sharded, q, k, v, do, forward_bound: float) -> dict:
    """dQ, dK, dV against the float64 chain rule, each within `sim.api.gradient_tolerance`'s bound for
    FlashAttention-2's backward over the whole sequence (every device's pieces together are its tiles), given the
    ring's forward bound; the ring stores each of its P pieces of dK, dV before the float32 sum that carries them
    home, as GQA's per-head schedule stores each head's: its `group` term with g = P."""
    Br, Bc = result.backward_blocks
    refs, scales = reference_variants.backward_scales(q, k, v, do, causal=result.causal, scale=result.scale)
    want = dict(zip(gradient_tolerance.GRADIENTS, refs, strict=True))
    got = dict(dq=result.dq, dk=result.dk, dv=result.dv)
    errors = {name: gradient_tolerance.max_abs(got[name].astype(np.float64) - want[name]) for name in want}
    n, d = q.shape[-2:]
    pieces = result.devices if result.scheme == "ring" else 1  # Ulysses: whole heads on one device
    bounds = gradient_tolerance.gradient_tolerance(
        "flash2", result.dtype, d=d, nk=n, rows=n, forward_block_cols=result.block_cols, block_rows=Br,
        block_cols=Bc, sigma=tolerance.score_scale(q, k, result.scale), s_max=scales["s"],
        forward_bound=forward_bound, o_max=scales["o"], do_l1=float(np.abs(do.astype(np.float64)).sum(-1).max()),
        scales=scales, ref_max={name: gradient_tolerance.max_abs(r) for name, r in want.items()}, group=pieces,
    )  # fmt: skip
    each = {name: bool(errors[name] <= bounds[name]) for name in want}
    tol = {"formula": gradient_tolerance.FORMULA, "bound": bounds, "within": all(each.values()), "each": each}
    return {"max_abs_err": errors, "tolerance": tol}
