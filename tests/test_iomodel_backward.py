"""The closed forms of `sim.machine.iomodel` equal the simulated ledgers, forward and backward; the Θ(N²d²/M) scaling."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms import registry
from sim.api import reference
from sim.machine import iomodel

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32]
M = 1 << 30


def inputs(N, Nk, d, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((rows, d)).astype(dtype) for rows in (N, Nk, Nk, N))


def ledger_counts(r) -> tuple:
    return r.hbm_read_bytes, r.hbm_write_bytes, r.flops, r.exps, r.ledger.work["elementwise"]


def closed(c: iomodel.Counts) -> tuple:
    return c.hbm_read_bytes, c.hbm_write_bytes, c.flops, c.exps, c.elementwise


@settings(max_examples=120, deadline=None)
@given(
    algorithm=st.sampled_from(["standard", "flash1", "flash2"]),
    N=st.integers(1, 40),
    Nk=st.integers(1, 40),
    d=st.integers(1, 8),
    Br=st.integers(1, 24),
    Bc=st.integers(1, 24),
    dtype=st.sampled_from(DTYPES),
    causal=st.booleans(),
    dropout=st.booleans(),
)
def test_ledger_equals_closed_form_forward_and_backward(algorithm, N, Nk, d, Br, Bc, dtype, causal, dropout):
    dropout = dropout and algorithm != "standard"
    p, seed = (0.3, 1) if dropout else (0.0, None)
    q, k, v, do = inputs(N, Nk, d, dtype)
    s = np.dtype(dtype).itemsize
    f = sim.run(algorithm, q, k, v, causal=causal, block_rows=Br, block_cols=Bc, sram_bytes=M, dropout_p=p, seed=seed)
    assert ledger_counts(f) == closed(registry.counts(algorithm, N, Nk, d, s, Br, Bc, causal, dropout))
    o, lse = reference.attention(q, k, v, causal=causal)
    g = sim.backward(
        algorithm, q, k, v, o.astype(dtype), lse, do, causal=causal, block_rows=Br, block_cols=Bc, sram_bytes=M,
        dropout_p=p, seed=seed,
    )  # fmt: skip
    assert ledger_counts(g) == closed(registry.backward_counts(algorithm, N, Nk, d, s, Br, Bc, causal, dropout))


@pytest.mark.parametrize("algorithm", ["standard", "flash1", "flash2"])
@pytest.mark.parametrize("causal", [False, True])
def test_kernels_add_up_to_the_pass(algorithm, causal):
    args = (70, 50, 16, 2, 16, 8, causal, algorithm != "standard")
    assert iomodel.sum_counts(c for _, c in registry.kernels(algorithm, *args)) == registry.counts(algorithm, *args)
    back = iomodel.sum_counts(c for _, c in registry.backward_kernels(algorithm, *args))
    assert back == registry.backward_counts(algorithm, *args)


def test_standard_backward_kernels_match_the_ledger_tensor_by_tensor():
    N, Nk, d, s = 30, 20, 4, 2
    q, k, v, do = inputs(N, Nk, d, np.float16)
    o, lse = reference.attention(q, k, v)
    t = sim.backward("standard", q, k, v, o.astype(np.float16), lse, do, block_rows=8, block_cols=8).ledger.per_tensor()
    kernels = dict(iomodel.standard_backward_kernels(N, Nk, d, s))
    assert t["dV"]["write"] == kernels["dV = Pᵀ dO"].hbm_write_bytes
    assert t["dP"]["write"] == kernels["dP = dO Vᵀ"].hbm_write_bytes
    assert t["dS"]["write"] == kernels["dS = P ∘ (dP − D)"].hbm_write_bytes
    assert t["P"]["read"] + t["dP"]["read"] + t["dS"]["read"] == 5 * s * N * Nk  # lines 1, 3 (P, dP), 4, 5


def test_flash_flops_over_standard_are_fourteen_to_twelve():
    # forward 4N²d for both; backward 8N²d for standard, 10N²d for FlashAttention (S recomputed)
    N, d, s = 1024, 64, 2
    std = iomodel.standard(N, N, d, s) + registry.backward_counts("standard", N, N, d, s, 64, 64)
    fa = iomodel.flash1(N, N, d, s, 64) + iomodel.flash1_backward(N, N, d, s, 64, 64)
    assert (std.flops, fa.flops) == (12 * N * N * d, 14 * N * N * d)


# -- Θ(N²d²/M): Theorem 2 (forward) and Theorem 5 (backward) of the FlashAttention paper -----
#
# With the paper's block rule the block of the outer loop holds Θ(M/d) rows (Bc = ⌈M/4d⌉), so
# halving M halves it. For block sizes that divide N, each ledger is exactly
#     bytes(N, B) = a·N²/B + b·N          (N = Nk, d fixed; B the outer loop's block),
# the first term Θ(N²d²/M), the second each input and gradient moved a constant number of times.
# Two measurements at (N, B) and (N, 2B) fix a and b; the formula then predicts (2N, B/2) exactly:
#     bytes(2N, B/2) = 8·a·N²/B + 2·b·N = 14·bytes(N, B) − 12·bytes(N, 2B).


def _bytes(algorithm, direction, N, B, d=8):
    q, k, v, do = inputs(N, N, d)
    blocks = (
        dict(block_rows=B, block_cols=4)
        if (algorithm, direction) == ("flash2", "forward")
        else dict(block_rows=4, block_cols=B)
    )
    if direction == "forward":
        return sim.run(algorithm, q, k, v, sram_bytes=M, **blocks).hbm_bytes
    o, lse = reference.attention(q, k, v)
    return sim.backward(algorithm, q, k, v, o.astype(np.float32), lse, do, sram_bytes=M, **blocks).hbm_bytes


@pytest.mark.parametrize(
    "algorithm, direction",
    [("flash1", "forward"), ("flash2", "forward"), ("flash1", "backward"), ("flash2", "backward")],
)
def test_doubling_n_and_halving_m_multiplies_the_quadratic_term_by_eight(algorithm, direction):
    N, B = 64, 8
    L1, L2, L3 = (
        _bytes(algorithm, direction, N, B),
        _bytes(algorithm, direction, N, 2 * B),
        _bytes(algorithm, direction, 2 * N, B // 2),
    )
    assert L3 == 14 * L1 - 12 * L2
    quadratic, linear = 2 * (L1 - L2), 2 * L2 - L1  # a·N²/B and b·N at (N, B)
    assert quadratic > 0 and linear > 0
    assert L3 == 8 * quadratic + 2 * linear
    assert 2 < L3 / L1 < 8  # the whole ratio tends to 8 from below as N²/B outgrows N


def test_standard_attention_bytes_do_not_depend_on_m_and_grow_as_n_squared():
    for direction in ("forward", "backward"):
        by_block = {_bytes("standard", direction, 64, B) for B in (4, 8, 16)}
        assert len(by_block) == 1
        L1, L2, L4 = (_bytes("standard", direction, n, 8) for n in (32, 64, 128))
        assert L4 - 2 * L2 == 4 * (L2 - 2 * L1)  # a·N² + b·N exactly: the N² part grows 4× per doubling
