"""Assignment 1 — the online softmax: the one-element update and the merge of two partial states.

What to implement
    A softmax over a stream of logits x₁, x₂, … can be computed in one pass by keeping a running
    state (m, ℓ): m = max of the logits seen, ℓ = Σ exp(xᵢ − m). Implement, elementwise over arrays
    (one state per row):
    `update(m, ℓ, x)`            the state after one more logit x per row;
    `merge(m₁, ℓ₁, m₂, ℓ₂)`      (m₁, ℓ₁) ⊕ (m₂, ℓ₂): the state of two disjoint parts of a stream.
    Both return a tuple (m, ℓ) of float64 arrays shaped like their inputs. The empty state is
    m = −∞, ℓ = 0; a logit of −∞ (a masked key) leaves a state as it is; logits may be in the
    thousands, where exp(x) overflows — never evaluate exp of anything positive.

The API you may use
    NumPy. `sim.algorithms.softmax` is the simulator's own implementation of exactly this; the grader refuses
    to import it while it runs your code.

How it is graded
    Your functions run in a separate process; their results come back to the grader and are checked
    against float64 sums over the whole stream (m exact to 1e-10, ℓ to 1e-10 relative) on fresh
    random streams every run, seeded: ragged streams, masked logits, rows with no finite logit,
    logits in the thousands. `update` is folded over each row's stream from the empty state, one
    column at a time: the grader keeps the stream and hands over column t only after it has
    checked the state your update returned for columns 0 … t − 1 (the first wrong one names the
    column); `merge` gets the states of the two halves of a stream split at a random point (possibly empty).
    The tests below marked "public" ship with this file; the grader also runs hidden ones.

How to check yourself
    flashsim grade --self-check 01_online_softmax.py
"""

import numpy as np

GRADING = {"title": "Online softmax", "driver": "softmax", "forbid": ["sim.algorithms.softmax"]}

TESTS = [
    {"name": "update, a few logits", "visibility": "public", "points": 20, "check": "update",
     "rows": [1, 4], "length": [1, 8]},
    {"name": "merge of two parts", "visibility": "public", "points": 20, "check": "merge",
     "rows": [1, 4], "length": [2, 16]},
    # BEGIN HIDDEN TESTS
    {"name": "update, logits in the thousands", "visibility": "hidden", "points": 15, "check": "update",
     "rows": [2, 8], "length": [20, 60], "logit_scale": 3000.0},
    {"name": "update, masked logits and an empty row", "visibility": "hidden", "points": 15, "check": "update",
     "rows": [3, 8], "length": [5, 40], "masked": 0.4, "empty_row": True},
    {"name": "merge, logits in the thousands, masked", "visibility": "hidden", "points": 15, "check": "merge",
     "rows": [3, 8], "length": [5, 40], "logit_scale": 3000.0, "masked": 0.5, "empty_row": True},
    {"name": "update, a long stream", "visibility": "hidden", "points": 15, "check": "update",
     "rows": [4, 16], "length": [300, 500]},
    # END HIDDEN TESTS
]


def _shift(m):
    """m where it is finite, 0 where it is −∞: so that x − shift never computes −∞ − (−∞)."""
    return np.where(np.isneginf(m), 0.0, m)  # SOLUTION: return m with its −∞ entries replaced by 0


def update(m, ℓ, x):
    """The state (m, ℓ) after one more logit x per row."""
    # BEGIN SOLUTION: the new max, then rescale the old sum to it and add this logit's term
    m_new = np.maximum(m, x)
    s = _shift(m_new)
    return m_new, ℓ * np.exp(m - s) + np.exp(x - s)
    # END SOLUTION


def merge(m1, ℓ1, m2, ℓ2):
    """(m₁, ℓ₁) ⊕ (m₂, ℓ₂): the state of both parts of the stream together."""
    # BEGIN SOLUTION: the larger max, and each sum rescaled to it
    m = np.maximum(m1, m2)
    s = _shift(m)
    return m, ℓ1 * np.exp(m1 - s) + ℓ2 * np.exp(m2 - s)
    # END SOLUTION
