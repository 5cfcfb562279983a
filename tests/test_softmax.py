"""Online softmax: the (m, ℓ) state and its merge ⊕ against a float64 log-sum-exp."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sim.softmax import SoftmaxState

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
