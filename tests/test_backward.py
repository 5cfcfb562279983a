"""The backward pass: gradients against the float64 reference and finite differences; SRAM; bad input."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms import registry
from sim.api import reference
from sim.machine import blocks

ALGORITHMS = ["standard", "flash1", "flash2"]
M = 1 << 30  # SRAM large enough for any block the tests pick


def inputs(N, Nk, d, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((rows, d)).astype(dtype) for rows in (N, Nk, Nk, N))  # q, k, v, do


def forward_state(algorithm, q, k, v, causal, **kw):
    """What the forward pass leaves for the backward: O and L (or flash1's ℓ, m)."""
    if algorithm == "flash1":
        r = sim.run("flash1", q, k, v, causal=causal, sram_bytes=M, **kw)
        return r.output, r.stats
    r = sim.run("flash2", q, k, v, causal=causal, sram_bytes=M, **kw)
    return r.output, r.lse


def rel_err(got, want):
    """Largest error relative to the largest entry of the float64 gradient."""
    return np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()


# fp32 storage and fp32 accumulation: unit roundoff 6e-8, grown by sums of at most ~100
# terms here, stays well under 1e-5 of the largest gradient entry.
FP32_TOL = 1e-5

SHAPES = [  # (N, Nk, d, Br, Bc, causal): ragged, causal, N < Nk, N > Nk (rows that see no key)
    (16, 16, 8, 4, 4, False),
    (37, 23, 5, 8, 6, False),
    (37, 23, 5, 8, 6, True),
    (12, 40, 7, 5, 16, True),
    (40, 12, 7, 16, 5, True),
    (1, 33, 4, 1, 8, True),
]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("N, Nk, d, Br, Bc, causal", SHAPES)
def test_gradients_match_float64_reference(algorithm, N, Nk, d, Br, Bc, causal):
    q, k, v, do = inputs(N, Nk, d, seed=N * Nk + d)
    o, stats = forward_state(algorithm, q, k, v, causal)
    g = sim.backward(algorithm, q, k, v, o, stats, do, causal=causal, block_rows=Br, block_cols=Bc, sram_bytes=M)
    want = reference.attention_backward(q, k, v, do, causal=causal)
    for name, got, ref in zip(("dq", "dk", "dv"), (g.dq, g.dk, g.dv), want, strict=True):
        assert got.dtype == np.float32 and got.shape == ref.shape
        assert rel_err(got, ref) < FP32_TOL, name


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_batched_heads_each_get_their_own_gradients(algorithm):
    rng = np.random.default_rng(7)
    q, do = (rng.standard_normal((2, 3, 20, 6)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((2, 3, 28, 6)).astype(np.float32) for _ in range(2))
    o, stats = forward_state(algorithm, q, k, v, True)
    g = sim.backward(algorithm, q, k, v, o, stats, do, causal=True, sram_bytes=1 << 16)
    want = reference.attention_backward(q, k, v, do, causal=True)
    for got, ref in zip((g.dq, g.dk, g.dv), want, strict=True):
        for b in range(2):
            for h in range(3):
                assert rel_err(got[b, h], ref[b, h]) < FP32_TOL
    assert g.heads == 6


def _loss(q, k, v, do, causal, mask=None):
    return float((reference.attention(q, k, v, causal=causal, dropout_mask=mask)[0] * do).sum())


def central_differences(q, k, v, do, causal, mask=None, h=1e-6):
    """∂/∂x of Σ(o ∘ do) for x in q, k, v, entry by entry, in float64."""
    args = [np.asarray(x, np.float64).copy() for x in (q, k, v)]
    grads = []
    for x in args:
        g = np.zeros_like(x)
        for idx in np.ndindex(*x.shape):
            x0 = x[idx]
            x[idx] = x0 + h
            up = _loss(*args, do, causal, mask)
            x[idx] = x0 - h
            down = _loss(*args, do, causal, mask)
            x[idx] = x0
            g[idx] = (up - down) / (2 * h)
        grads.append(g)
    return grads


@pytest.mark.parametrize("N, Nk, causal", [(3, 4, False), (4, 3, True), (5, 5, True)])
def test_reference_and_simulated_gradients_match_finite_differences(N, Nk, causal):
    q, k, v, do = inputs(N, Nk, 3, np.float64, seed=11)
    fd = central_differences(q, k, v, do, causal)
    ref = reference.attention_backward(q, k, v, do, causal=causal)
    # float64 central differences with h = 1e-6: truncation ~h², cancellation ~1e-16/h ≈ 1e-10
    for got, want in zip(ref, fd, strict=True):
        assert np.abs(got - want).max() <= 1e-7 * np.abs(want).max()
    q32, k32, v32, do32 = (x.astype(np.float32) for x in (q, k, v, do))
    for algorithm in ALGORITHMS:
        o, stats = forward_state(algorithm, q32, k32, v32, causal)
        g = sim.backward(algorithm, q32, k32, v32, o, stats, do32, causal=causal, block_rows=2, block_cols=2)
        # the simulator sees the inputs rounded to fp32, the differences do not: 1e-5 covers both
        for got, want in zip((g.dq, g.dk, g.dv), fd, strict=True):
            assert rel_err(got, want) < FP32_TOL


@pytest.mark.parametrize("dtype, u", [(np.float16, 2.0**-11), (ml_dtypes.bfloat16, 2.0**-8)])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_low_precision_gradients_within_the_rounding_they_take(algorithm, dtype, u):
    N, Nk, d, Br, Bc = 48, 60, 8, 16, 8
    q, k, v, do = inputs(N, Nk, d, dtype, seed=5)
    o, lse = reference.attention(q, k, v, causal=True)
    g = sim.backward(algorithm, q, k, v, o.astype(dtype), lse, do, causal=True, block_rows=Br, block_cols=Bc)
    want = reference.attention_backward(q, k, v, do, causal=True)
    # each of at most Tc + 4 roundings to the storage dtype (dQ's Tc write-backs, O, and standard
    # attention's stored P, dP, dS) moves a result by at most u/2 of its largest entry
    Tc = -(-Nk // Bc)
    for got, ref in zip((g.dq, g.dk, g.dv), want, strict=True):
        assert got.dtype == np.dtype(dtype)
        assert rel_err(got, ref) < (Tc + 4) * u / 2


def test_standard_reads_the_p_it_is_given_or_rebuilds_it_from_l():
    q, k, v, do = inputs(20, 30, 4)
    o, lse = reference.attention(q, k, v, causal=True)
    s = (q.astype(np.float64) @ k.T.astype(np.float64)) / 2.0
    p = np.where(np.tril(np.ones((20, 30)), 10) > 0, np.exp(s - lse[:, None]), 0.0).astype(np.float32)
    a = sim.backward("standard", q, k, v, o.astype(np.float32), {"P": p}, do, causal=True)
    b = sim.backward("standard", q, k, v, o.astype(np.float32), lse, do, causal=True)
    for x, y in zip((a.dq, a.dk, a.dv), (b.dq, b.dk, b.dv), strict=True):
        assert rel_err(x, y.astype(np.float64)) < FP32_TOL
    assert a.ledger.per_tensor()["P"]["read"] == 2 * 20 * 30 * 4  # line 1 and line 3 read P once each


def test_flash1_accepts_l_in_place_of_its_statistics():
    q, k, v, do = inputs(25, 18, 6)
    f1 = sim.run("flash1", q, k, v, causal=True)
    f2 = sim.run("flash2", q, k, v, causal=True)
    a = sim.backward("flash1", q, k, v, f1.output, f1.stats, do, causal=True)
    b = sim.backward("flash1", q, k, v, f1.output, f2.lse, do, causal=True)
    for x, y in zip((a.dq, a.dk, a.dv), (b.dq, b.dk, b.dv), strict=True):
        assert rel_err(x, y.astype(np.float64)) < FP32_TOL


def test_flash_backward_never_reads_an_n_by_n_tensor_standard_does():
    q, k, v, do = inputs(64, 64, 8)
    o, lse = reference.attention(q, k, v)
    tensors = {}
    for algorithm in ALGORITHMS:
        g = sim.backward(algorithm, q, k, v, o.astype(np.float32), lse, do, block_rows=16, block_cols=16)
        tensors[algorithm] = set(g.ledger.per_tensor())
    assert tensors["standard"] == {"Q", "K", "V", "dO", "P", "dP", "dS", "dQ", "dK", "dV"}
    assert tensors["flash1"] == {"Q", "K", "V", "O", "dO", "ℓ", "m", "dQ", "dK", "dV"}
    assert tensors["flash2"] == {"Q", "K", "V", "O", "dO", "L", "D", "dQ", "dK", "dV"}


def test_flash2_writes_dk_dv_once_and_read_modify_writes_dq():
    N, Nk, d, Br, Bc = 40, 24, 4, 8, 6
    q, k, v, do = inputs(N, Nk, d)
    o, lse = reference.attention(q, k, v)
    t = sim.backward("flash2", q, k, v, o.astype(np.float32), lse, do, block_rows=Br, block_cols=Bc).ledger.per_tensor()
    Tc = Nk // Bc
    assert t["dK"] == t["dV"] == {"read": 0, "write": 4 * Nk * d}
    assert t["dQ"] == {"read": Tc * 4 * N * d, "write": (Tc + 1) * 4 * N * d}  # zeroed once, then Tc round trips
    assert t["D"] == {"read": Tc * 4 * N, "write": 4 * N}  # the pre-pass writes D once


DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32]


@settings(max_examples=40, deadline=None)
@given(
    algorithm=st.sampled_from(ALGORITHMS),
    Br=st.integers(1, 16),
    Bc=st.integers(1, 16),
    extra_rows=st.integers(0, 20),
    extra_cols=st.integers(0, 20),
    d=st.integers(1, 10),
    dtype=st.sampled_from(DTYPES),
    causal=st.booleans(),
)
def test_sram_peak_equals_footprint(algorithm, Br, Bc, extra_rows, extra_cols, d, dtype, causal):
    N, Nk = Br + extra_rows, Bc + extra_cols  # at least one full block each way
    q, k, v, do = inputs(N, Nk, d, dtype)
    o, lse = reference.attention(q, k, v, causal=causal)
    g = sim.backward(
        algorithm, q, k, v, o.astype(dtype), lse, do, causal=causal, block_rows=Br, block_cols=Bc, sram_bytes=M
    )
    s = np.dtype(dtype).itemsize
    expected = registry.need(algorithm, Br, Bc, d, s, backward=True)
    if algorithm == "standard":  # line 3 holds whole rows: P_i, dP_i, then float32 dS_i, and D_i
        expected = max(expected, blocks.whole_rows(N, Nk, s, M) * (s * Nk + max(s, 4) * Nk + 4))
    full_tile_seen = not causal or any(
        (i + 1) * Br - 1 + Nk - N >= 0 for i in range(N // Br)
    )  # some full Q block sees the first (full) K/V block
    if algorithm == "flash2" and not full_tile_seen:
        assert g.sram_peak_bytes < expected
    else:
        assert g.sram_peak_bytes == expected


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("hardware", ["A100-40GB", "RTX-4090", "toy"])
def test_fit_picks_blocks_that_fit_and_grows_bc_as_far_as_it_can(algorithm, hardware):
    hw = sim.machine.hardware.get(hardware)
    N, d, s = 512, 32 if hardware != "toy" else 4, 2
    Br, Bc = registry.fit(algorithm, N, N, d, s, hw.sram_bytes, backward=True)
    assert registry.need(algorithm, Br, Bc, d, s, backward=True) <= hw.sram_bytes
    if algorithm != "standard" and Bc < N:
        assert registry.need(algorithm, Br, min(2 * Bc, N), d, s, backward=True) > hw.sram_bytes


def test_backward_runs_inside_the_sram_it_picks_for_a100():
    q, k, v, do = inputs(256, 256, 64, np.float16)
    o, lse = reference.attention(q, k, v)
    for algorithm in ALGORITHMS:
        g = sim.backward(algorithm, q, k, v, o.astype(np.float16), lse, do, hardware="A100-40GB")
        assert g.sram_peak_bytes <= 163 * 1024


def test_record_steps_follows_the_listings_lines():
    q, k, v, do = inputs(8, 8, 4)
    o, lse = reference.attention(q, k, v, causal=True)
    lines = {}
    for algorithm in ("flash1", "flash2"):
        stats = {"ℓ": np.ones(8, np.float32), "m": lse.astype(np.float32)} if algorithm == "flash1" else lse
        g = sim.backward(
            algorithm, q, k, v, o.astype(np.float32), stats, do, causal=True, block_rows=4, block_cols=4, record="steps"
        )
        lines[algorithm] = {s.line for s in g.trace.steps}
        assert g.trace.algorithm == f"{algorithm} backward"
        assert g.trace.steps[-1].hbm_read_bytes == g.hbm_read_bytes  # one head: the trace's totals are the ledger's
    assert lines["flash1"] == {5, 7, 8, 10, 11, 12, 13, 16, 17, 19, 20, 21, 22, 24}  # Algorithm 4, no dropout
    assert lines["flash2"] == {3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18}  # FA2's Algorithm 2


# -- bad input: one line naming the argument ---------------------------------------------


def _good():
    q, k, v, do = inputs(6, 5, 3)
    o, lse = reference.attention(q, k, v)
    return dict(q=q, k=k, v=v, o=o.astype(np.float32), lse_or_stats=lse.astype(np.float32), do=do)


@pytest.mark.parametrize(
    "change, argument",
    [
        (dict(algorithm="flash3"), "algorithm:"),
        (dict(o=np.zeros((6, 4), np.float32)), "o:"),
        (dict(do=np.zeros((6, 3), np.float16)), "do:"),
        (dict(do=np.full((6, 3), np.nan, np.float32)), "do:"),
        (dict(lse_or_stats=np.zeros(5, np.float32)), "lse_or_stats:"),
        (dict(lse_or_stats={"x": 1}), "lse_or_stats:"),
        (dict(lse_or_stats=np.full(6, np.nan, np.float32)), "lse_or_stats:"),
        (dict(algorithm="flash2", dropout_p=1.0, seed=1), "dropout_p:"),
        (dict(algorithm="flash2", dropout_p=-0.1, seed=1), "dropout_p:"),
        (dict(algorithm="flash2", dropout_p=0.1), "seed:"),
        (dict(algorithm="flash2", dropout_p=0.1, seed=-3), "seed:"),
        (dict(algorithm="standard", dropout_p=0.1, seed=1), "dropout_p:"),
        (dict(block_rows=0), "block_rows:"),
        (dict(sram_bytes=64, block_rows=4, block_cols=4), "blocks:"),
        (dict(blocks="best"), "blocks:"),
        (dict(record="all"), "record:"),
        (dict(q=np.zeros((6, 4), np.float32)), "k:"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument(change, argument):
    args = _good() | {"algorithm": "flash2"} | change
    positional = [args.pop(n) for n in ("algorithm", "q", "k", "v", "o", "lse_or_stats", "do")]
    with pytest.raises(sim.InputError) as e:
        sim.backward(*positional, **args)
    assert str(e.value).startswith(argument) and "\n" not in str(e.value)


def test_paper_block_rule_is_used_when_it_fits_and_refused_with_the_buffers_when_not():
    q, k, v, do = inputs(64, 64, 8, np.float16)
    o, lse = reference.attention(q, k, v)
    g = sim.backward("flash2", q, k, v, o.astype(np.float16), lse, do, blocks="paper", sram_bytes=16384)
    # M = 8192 fp16 elements: Bc = ⌈M/4d⌉ = 256, Br = min(Bc, d) = 8; a block of more keys than Nk = 64 is all of them
    assert (g.block_rows, g.block_cols) == (8, 64)
    q, k, v, do = inputs(4096, 4096, 64, np.float16)  # refused before any tile moves: o and L need only their shapes
    o, lse = np.zeros_like(q), np.zeros(4096, np.float32)
    with pytest.raises(sim.InputError) as e:  # Bc = ⌈83,456/256⌉ = 326 keys of every K/V-sized buffer: far over 163 KiB
        sim.backward("flash2", q, k, v, o, lse, do, blocks="paper", hardware="A100-40GB")
    message = str(e.value)
    assert message.startswith("blocks: the paper's rule") and "dK_j" in message and "\n" not in message
