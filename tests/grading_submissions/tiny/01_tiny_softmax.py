"""A tiny assignment for tests that must grade quickly: assignment 1's online-softmax update on a few logits.

Graded against itself it scores full marks; its student copy (`flashsim assignments export`) scores zero.
"""

import numpy as np

GRADING = {"title": "Online softmax, tiny", "driver": "softmax", "forbid": ["sim.algorithms.softmax"]}

TESTS = [
    {
        "name": "update, a few logits",
        "visibility": "public",
        "points": 1,
        "check": "update",
        "rows": [1, 2],
        "length": [1, 4],
    },
    # BEGIN HIDDEN TESTS
    {
        "name": "update, masked logits",
        "visibility": "hidden",
        "points": 1,
        "check": "update",
        "rows": [1, 2],
        "length": [1, 4],
        "masked": 0.5,
    },
    # END HIDDEN TESTS
]


def update(m, ℓ, x):
    """The state (m, ℓ) after one more logit x per row."""
    # BEGIN SOLUTION: the new max, then rescale the old sum to it and add this logit's term
    m_new = np.maximum(m, x)
    s = np.where(np.isneginf(m_new), 0.0, m_new)
    return m_new, ℓ * np.exp(m - s) + np.exp(x - s)
    # END SOLUTION
