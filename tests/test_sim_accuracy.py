"""sim.run against the float64 reference, held to the tolerances of `sim.api.tolerance` (one home: `flashsim run`'s
verdict uses them too), each derived there from the storage dtype's rounding.

The reference is computed in float64 on the inputs *as stored* (rounded to the storage
dtype), so it measures what the algorithm does, not the rounding of its inputs.
"""

import ml_dtypes
import numpy as np
import pytest

import sim
from sim.api import reference
from sim.api.tolerance import score_scale, tolerance
from sim.core.dtypes import dtype_name

FP32_REL = 1e-5


def inputs(N, Nk, d, dtype, seed=0, logit_scale=1.0, batch=()):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((*batch, N, d)) * logit_scale).astype(dtype)
    k = (rng.standard_normal((*batch, Nk, d)) * logit_scale).astype(dtype)
    v = rng.standard_normal((*batch, Nk, d)).astype(dtype)
    return q, k, v


def bound(algorithm, result, q, k, v, ref):
    """The bound on max|O − ref|, with max|S|, max|V| and the score scale σ taken here from the stored inputs."""
    s_max = result.scale * np.abs(q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)).max()
    tol = tolerance(
        algorithm, dtype_name(q.dtype), d=q.shape[-1], nk=k.shape[-2], block_cols=result.block_cols,
        sigma=score_scale(q, k, result.scale), v_max=np.abs(v.astype(np.float64)).max(), ref_max=np.abs(ref).max(),
        s_max=s_max,
    )  # fmt: skip
    return tol.bound


CASES = [
    # (N, Nk, d, Br, Bc, causal, logit_scale)
    (37, 53, 8, 8, 16, False, 1.0),  # ragged on both sides, N < Nk
    (53, 37, 8, 16, 8, True, 1.0),  # causal with N > Nk: rows 0…15 see no key at all
    (64, 64, 16, 16, 16, True, 1.0),  # square causal, blocks divide evenly
    (33, 33, 5, 7, 3, True, 1.0),  # odd d and odd blocks
    (1, 100, 8, 1, 32, True, 1.0),  # one query (decoding-like), bottom-right: sees every key
    (40, 40, 16, 8, 8, False, 8.0),  # logits in the hundreds: |S| up to ≈ 280
    (40, 40, 16, 8, 8, True, 8.0),
]


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("N,Nk,d,Br,Bc,causal,logit_scale", CASES)
def test_output_matches_float64_reference(algorithm, dtype, N, Nk, d, Br, Bc, causal, logit_scale):
    q, k, v = inputs(N, Nk, d, dtype, logit_scale=logit_scale)
    result = sim.run(algorithm, q, k, v, causal=causal, block_rows=Br, block_cols=Bc)
    ref, ref_lse = reference.attention(q, k, v, causal=causal)
    out = result.output.astype(np.float64)
    assert result.output.dtype == np.dtype(dtype)
    assert np.isfinite(out).all()
    err = np.abs(out - ref)
    assert (err <= bound(algorithm, result, q, k, v, ref)).all(), f"max error {err.max():.3e}"
    if algorithm == "flash2":
        lse = result.lse.astype(np.float64)
        assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
        seen = np.isfinite(ref_lse)
        # L is float32 arithmetic on float32 logits: relative 1e-5 of the logits' magnitude
        assert np.abs(lse[seen] - ref_lse[seen]).max() <= FP32_REL * max(1.0, np.abs(ref_lse[seen]).max())


def test_logits_in_the_hundreds_are_really_that_large():
    q, k, _v = inputs(40, 40, 16, np.float32, logit_scale=8.0)
    s = (q.astype(np.float64) @ k.T.astype(np.float64)) / 4
    assert np.abs(s).max() > 200


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
def test_fully_masked_rows_output_zero(algorithm):
    q, k, v = inputs(20, 6, 4, np.float32, seed=3)
    result = sim.run(algorithm, q, k, v, causal=True, block_rows=4, block_cols=4)
    hidden = 20 - 6  # query r sees keys c ≤ r + Nk − N: the first 14 rows see none
    assert np.array_equal(result.output[:hidden], np.zeros((hidden, 4), np.float32))
    assert np.abs(result.output[hidden:]).max() > 0
    if algorithm == "flash2":
        assert np.isneginf(result.lse[:hidden]).all() and np.isfinite(result.lse[hidden:]).all()


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
def test_batched_inputs_equal_per_head_runs(algorithm):
    q, k, v = inputs(19, 23, 8, np.float16, seed=1, batch=(2, 3))
    batched = sim.run(algorithm, q, k, v, causal=True, block_rows=8, block_cols=8)
    ref, _ = reference.attention(q, k, v, causal=True)
    assert batched.output.shape == (2, 3, 19, 8)
    one = sim.run(algorithm, q[1, 2], k[1, 2], v[1, 2], causal=True, block_rows=8, block_cols=8)
    assert np.array_equal(batched.output[1, 2], one.output)
    assert batched.hbm_read_bytes == 6 * one.hbm_read_bytes
    assert batched.hbm_write_bytes == 6 * one.hbm_write_bytes
    assert batched.flops == 6 * one.flops
    assert (
        np.abs(batched.output.astype(np.float64) - ref).max() < 0.05
    )  # fp16: a loose sanity bound; exact bounds above


def test_float64_inputs_are_stored_as_float32():
    q, k, v = inputs(9, 9, 4, np.float64)
    result = sim.run("flash2", q, k, v)
    assert result.output.dtype == np.float32 and result.dtype == "fp32"
    ref, _ = reference.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32))
    assert np.abs(result.output - ref).max() <= FP32_REL * np.abs(ref).max()


def test_custom_scale_is_used():
    q, k, v = inputs(12, 12, 4, np.float32)
    result = sim.run("flash2", q, k, v, scale=0.3, block_rows=4, block_cols=4)
    ref, _ = reference.attention(q, k, v, scale=0.3)
    default, _ = reference.attention(q, k, v)
    assert np.abs(result.output - ref).max() <= FP32_REL * np.abs(ref).max()
    assert np.abs(result.output - default).max() > 1e-3


def test_walkthrough_output_is_attention_of_its_inputs():
    from sim.lab import walkthrough

    flash = walkthrough.flash()
    ref, _ = reference.attention(walkthrough.Q, walkthrough.K, walkthrough.V)
    assert np.abs(flash.output - ref).max() <= FP32_REL * np.abs(ref).max()
    # V is the identity, so every output row is a probability distribution
    assert np.allclose(flash.output.sum(axis=1), 1.0, atol=1e-6)
