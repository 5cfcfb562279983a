"""Online softmax: the running state (m, ℓ) and its associative merge ⊕.

For a stream of logits x₁, x₂, …: m = max xᵢ and ℓ = Σ exp(xᵢ − m). Two partial states
over disjoint parts of the stream merge exactly:

    (m₁, ℓ₁) ⊕ (m₂, ℓ₂) = (m, ℓ₁·e^(m₁−m) + ℓ₂·e^(m₂−m)),  m = max(m₁, m₂)

so the softmax of a row can be built block by block — the heart of FlashAttention.
Everything works elementwise on arrays, so one state can track many rows at once, and in
the arrays' own dtype: the listings keep their statistics in float32, as the GPU does.
The operations that evaluate exponentials take `exp`, so that a listing can pass
`chip.exp`, which counts them.
"""

from dataclasses import dataclass

import numpy as np


def shift(m):
    """m where it is finite and 0 where it is −∞, so that x − shift(m) never computes −∞ − (−∞)."""
    return np.where(np.isneginf(m), 0.0, m)


def normalize(x: np.ndarray, ℓ: np.ndarray) -> np.ndarray:
    """diag(ℓ)⁻¹ x: each row of x divided by its ℓ, and 0 in a row with ℓ = 0 (a query that sees no key)."""
    if np.all(ℓ > 0):  # the same quotients without the masked division, which NumPy runs several times slower
        return np.divide(x, ℓ[:, None], out=np.empty_like(x))
    return np.divide(x, ℓ[:, None], out=np.zeros_like(x), where=ℓ[:, None] > 0)


def _floats(x) -> np.ndarray:
    x = np.asarray(x)
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)


@dataclass(frozen=True)
class SoftmaxState:
    """Running max `m` and running sum `ℓ` = Σ exp(x − m) of the logits seen so far."""

    m: np.ndarray
    ℓ: np.ndarray

    @classmethod
    def empty(cls, shape=(), dtype=np.float64) -> "SoftmaxState":
        """The state of no logits: m = −∞, ℓ = 0 (the identity of ⊕)."""
        return cls(np.full(shape, -np.inf, dtype), np.zeros(shape, dtype))

    @classmethod
    def from_lse(cls, L) -> "SoftmaxState":
        """The state whose log-sum-exp is L: m = L, ℓ = 1 (exp(x − m)/ℓ is then exp(x − L))."""
        L = _floats(L)
        return cls(L, np.ones_like(L))

    @classmethod
    def block(cls, x, axis: int = -1, exp=np.exp) -> tuple["SoftmaxState", np.ndarray]:
        """The state of a block of logits, reduced along `axis`, and the block's P̃ = exp(x − m)."""
        x = _floats(x)
        m = x.max(axis=axis)
        p = exp(x - np.expand_dims(shift(m), axis))
        return cls(m, p.sum(axis=axis)), p

    @classmethod
    def of(cls, x, axis: int = -1, exp=np.exp) -> "SoftmaxState":
        """The state of a block of logits, reduced along `axis`."""
        return cls.block(x, axis, exp)[0]

    def extend(self, S, exp=np.exp) -> tuple["SoftmaxState", np.ndarray, np.ndarray]:
        """The state after one more block of logits S (rows × columns), with the block's P̃ = exp(S − m_new)
        and α = e^(m − m_new), the factor that rescales everything summed before: the online update."""
        m = np.maximum(self.m, S.max(axis=-1))
        m_shift = shift(m)
        p = exp(S - m_shift[..., None])
        α = exp(self.m - m_shift)
        return SoftmaxState(m, α * self.ℓ + p.sum(axis=-1)), p, α

    def update(self, x) -> "SoftmaxState":
        """The state after one more logit per row (the one-element online update)."""
        return self.merge(SoftmaxState(_floats(x), np.ones(np.shape(x))))

    def rescale(self, other: "SoftmaxState", exp=np.exp) -> tuple["SoftmaxState", np.ndarray, np.ndarray]:
        """(m₁, ℓ₁) ⊕ (m₂, ℓ₂) with the factors that carry each part into it: α = e^(m₁−m), β = e^(m₂−m)."""
        m = np.maximum(self.m, other.m)
        m_shift = shift(m)
        α, β = exp(self.m - m_shift), exp(other.m - m_shift)
        return SoftmaxState(m, α * self.ℓ + β * other.ℓ), α, β

    def merge(self, other: "SoftmaxState") -> "SoftmaxState":
        """(m₁, ℓ₁) ⊕ (m₂, ℓ₂): the state of both parts together."""
        return self.rescale(other)[0]

    __or__ = merge

    @property
    def lse(self) -> np.ndarray:
        """log Σ exp(x) = m + log ℓ (−∞ where no logit was finite)."""
        with np.errstate(divide="ignore"):
            return np.where(self.ℓ > 0, self.m + np.log(self.ℓ), -np.inf)

    def probabilities(self, x, axis: int = -1, exp=np.exp) -> np.ndarray:
        """softmax(x) for logits x that this state has seen in full: exp(x − m) / ℓ, 0 in a row with ℓ = 0."""
        x = _floats(x)
        m, ℓ = np.expand_dims(shift(self.m), axis), np.expand_dims(self.ℓ, axis)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(ℓ > 0, exp(x - m) / ℓ, 0.0)
