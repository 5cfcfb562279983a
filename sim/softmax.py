"""Online softmax: the running state (m, ℓ) and its associative merge ⊕.

For a stream of logits x₁, x₂, …: m = max xᵢ and ℓ = Σ exp(xᵢ − m). Two partial states
over disjoint parts of the stream merge exactly:

    (m₁, ℓ₁) ⊕ (m₂, ℓ₂) = (m, ℓ₁·e^(m₁−m) + ℓ₂·e^(m₂−m)),  m = max(m₁, m₂)

so the softmax of a row can be built block by block — the heart of FlashAttention.
Everything works elementwise on arrays, so one state can track many rows at once.
"""

from dataclasses import dataclass

import numpy as np


def shift(m):
    """m where it is finite and 0 where it is −∞, so that x − shift(m) never computes −∞ − (−∞)."""
    return np.where(np.isneginf(m), 0.0, m)


@dataclass(frozen=True)
class SoftmaxState:
    """Running max `m` and running sum `ℓ` = Σ exp(x − m) of the logits seen so far."""

    m: np.ndarray
    ℓ: np.ndarray

    @classmethod
    def empty(cls, shape=()) -> "SoftmaxState":
        """The state of no logits: m = −∞, ℓ = 0 (the identity of ⊕)."""
        return cls(np.full(shape, -np.inf), np.zeros(shape))

    @classmethod
    def of(cls, x, axis: int = -1) -> "SoftmaxState":
        """The state of a block of logits, reduced along `axis`."""
        x = np.asarray(x, dtype=np.float64)
        m = x.max(axis=axis)
        return cls(m, np.exp(x - np.expand_dims(shift(m), axis)).sum(axis=axis))

    def update(self, x) -> "SoftmaxState":
        """The state after one more logit per row (the one-element online update)."""
        return self.merge(SoftmaxState(np.asarray(x, dtype=np.float64), np.ones(np.shape(x))))

    def merge(self, other: "SoftmaxState") -> "SoftmaxState":
        """(m₁, ℓ₁) ⊕ (m₂, ℓ₂): the state of both parts together."""
        m = np.maximum(self.m, other.m)
        s = shift(m)
        return SoftmaxState(m, self.ℓ * np.exp(self.m - s) + other.ℓ * np.exp(other.m - s))

    __or__ = merge

    @property
    def lse(self) -> np.ndarray:
        """log Σ exp(x) = m + log ℓ (−∞ where no logit was finite)."""
        with np.errstate(divide="ignore"):
            return np.where(self.ℓ > 0, self.m + np.log(self.ℓ), -np.inf)

    def probabilities(self, x, axis: int = -1) -> np.ndarray:
        """softmax(x) for logits x that this state has seen in full: exp(x − m) / ℓ."""
        x = np.asarray(x, dtype=np.float64)
        m, ℓ = np.expand_dims(shift(self.m), axis), np.expand_dims(self.ℓ, axis)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(ℓ > 0, np.exp(x - m) / ℓ, 0.0)
