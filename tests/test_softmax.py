"""Online softmax: the (m, ℓ) state and its merge ⊕ against a float64 log-sum-exp."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sim.algorithms.softmax import SoftmaxState, normalize

logits = arrays(np.float64, st.integers(1, 30), elements=st.floats(-300, 300))


def logsumexp(x):
    m = x.max()
    return m + np.log(np.exp(x - m).sum())


@settings(max_examples=200, deadline=None)
@given(x=logits, cut=st.integers(0, 30))
def test_merge_of_two_parts_equals_the_whole(x, cut):
    cut = min(cut, len(x))
    whole = SoftmaxState.of(x)
    parts = SoftmaxState.of(x[:cut]) if cut else SoftmaxState.empty()
    merged = parts.merge(SoftmaxState.of(x[cut:]) if cut < len(x) else SoftmaxState.empty())
    assert np.isclose(merged.lse, logsumexp(x), rtol=1e-12, atol=1e-12)
    assert np.isclose(whole.lse, merged.lse, rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(a=logits, b=logits, c=logits)
def test_merge_is_associative(a, b, c):
    A, B, C = (SoftmaxState.of(x) for x in (a, b, c))
    left, right = (A | B) | C, A | (B | C)
    assert np.isclose(left.m, right.m) and np.isclose(left.ℓ, right.ℓ, rtol=1e-12)


@settings(max_examples=100, deadline=None)
@given(x=logits)
def test_one_element_updates_equal_the_block_state(x):
    state = SoftmaxState.empty()
    for xi in x:
        state = state.update(xi)
    assert state.m == x.max()
    assert np.isclose(state.ℓ, np.exp(x - x.max()).sum(), rtol=1e-12)
    p = state.probabilities(x)
    assert np.allclose(p, np.exp(x - logsumexp(x)), rtol=1e-12, atol=1e-300)


def test_rows_are_independent_and_minus_infinity_is_the_identity():
    x = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]])
    state = SoftmaxState.of(x)
    assert np.isclose(state.lse[0], logsumexp(x[0])) and np.isneginf(state.lse[1])
    empty = SoftmaxState.empty((2,))
    merged = empty | state
    assert np.array_equal(merged.m, state.m) and np.array_equal(merged.ℓ, state.ℓ)
    assert np.array_equal(state.probabilities(x)[1], np.zeros(3))


rows = arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 12)), elements=st.floats(-60, 60))


@settings(max_examples=100, deadline=None)
@given(a=rows, b_cols=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_extend_by_a_block_equals_the_state_of_both_blocks(a, b_cols, seed):
    b = np.random.default_rng(seed).uniform(-60, 60, (a.shape[0], b_cols))
    before = SoftmaxState.of(a)
    after, p, α = before.extend(b)
    whole = np.concatenate([a, b], axis=1)
    assert np.allclose(after.lse, [logsumexp(r) for r in whole], rtol=1e-12)
    assert np.array_equal(after.m, whole.max(axis=1))
    assert np.allclose(p, np.exp(b - whole.max(axis=1, keepdims=True)), rtol=1e-12)
    assert np.allclose(α, np.exp(a.max(axis=1) - whole.max(axis=1)), rtol=1e-12)


@settings(max_examples=100, deadline=None)
@given(a=rows, b=rows)
def test_rescale_gives_the_merge_and_the_factors_that_carry_each_part(a, b):
    n = min(a.shape[0], b.shape[0])
    A, B = SoftmaxState.of(a[:n]), SoftmaxState.of(b[:n])
    merged, α, β = A.rescale(B)
    m = np.maximum(a[:n].max(axis=1), b[:n].max(axis=1))
    assert np.array_equal(merged.m, m)
    assert np.allclose(α, np.exp(a[:n].max(axis=1) - m)) and np.allclose(β, np.exp(b[:n].max(axis=1) - m))
    assert np.allclose(merged.lse, [logsumexp(np.concatenate([x, y])) for x, y in zip(a[:n], b[:n], strict=True)])


def test_block_returns_the_unnormalized_probabilities_and_counts_exponentials_through_exp():
    x = np.array([[0.5, -1.0, 2.0], [3.0, 3.0, -np.inf]])
    calls = []

    def counting_exp(y):
        calls.append(np.size(y))
        return np.exp(y)

    state, p = SoftmaxState.block(x, exp=counting_exp)
    assert calls == [6]
    assert np.allclose(p, np.exp(x - x.max(axis=1, keepdims=True)))
    assert np.allclose(state.ℓ, [np.exp(x[0] - 2).sum(), 2.0])


def test_float32_states_stay_float32_within_float32_rounding():
    x = np.random.default_rng(0).uniform(-30, 30, (4, 16)).astype(np.float32)
    state = SoftmaxState.empty(4, np.float32)
    for j in range(0, 16, 5):
        state, p, α = state.extend(x[:, j : j + 5])
        assert state.m.dtype == state.ℓ.dtype == p.dtype == α.dtype == np.float32
    want = [logsumexp(r) for r in x.astype(np.float64)]
    assert state.lse.dtype == np.float32
    assert np.allclose(state.lse, want, rtol=0, atol=1e-5 * np.abs(want).max())  # a few float32 roundings


def test_a_log_sum_exp_is_the_state_with_l_equal_to_one():
    x = np.array([[1.0, 2.0, 0.5], [-np.inf, -np.inf, -np.inf]])
    L = SoftmaxState.of(x).lse
    p = SoftmaxState.from_lse(L).probabilities(x)
    assert np.allclose(p[0], np.exp(x[0]) / np.exp(x[0]).sum(), rtol=1e-12)
    assert np.array_equal(p[1], np.zeros(3))


def test_normalize_divides_rows_and_leaves_rows_with_no_mass_at_zero():
    x = np.array([[2.0, 4.0], [1.0, 1.0], [0.0, 0.0]])
    assert np.array_equal(normalize(x, np.array([2.0, 4.0, 0.0])), [[1.0, 2.0], [0.25, 0.25], [0.0, 0.0]])
