"""How far a simulated output may be from the float64 reference: the bounds of the README's "How exact is it?".

The reference is taken on the inputs as stored, so a bound covers what the algorithm rounds, not its inputs.
With u the unit roundoff of the storage dtype (fp16 2⁻¹¹, bf16 2⁻⁸), per element of the output o:

- fp32 storage: |o − ref| ≤ 1e-5·max|ref| (float32 arithmetic throughout);
- FlashAttention-2 (flash2): O is rounded once when written: u·|ref| + 1e-5·max|ref|;
- Algorithm 1 (flash1): O_i is rounded each of the Tc times it goes back to HBM, every rescale weight
  ≤ 1, so the errors add at most: Tc·u·max|V| + 1e-5·max|ref|;
- ring attention across P devices (`sim.ring`): each step's partial O_t is rounded once (≤ u·max|V|), the
  partials merge in float32 with weights summing to 1, and O is rounded once: u·|ref| + u·max|V| + 1e-5·max|ref|;
- standard attention: S is rounded (each logit moves ≤ u·max|S|, each probability by a factor
  ≤ e^(2u·max|S|)), then P and O: ((e^(2u·max|S|) − 1)(1 + u) + u)·max|V| + u·|ref| + 1e-5·max|ref|.

Derived from the same float32 floor, for what the grader also checks (`sim.grading.problem`):

- the log-sum-exp (m + log ℓ, or L) is float32 arithmetic on float32 logits, whatever the storage:
  1e-5 of its magnitude, at least 1e-5 (where it is near 0), over the rows that see some key;
- a gradient (stored in fp32, accumulated in float32): 1e-5·max|ref|.
"""

from dataclasses import dataclass
from math import ceil, expm1

import numpy as np

U = {"fp16": 2.0**-11, "bf16": 2.0**-8}  # unit roundoff of the 16-bit storage dtypes
FLOOR = 1e-5  # float32 arithmetic, relative to max|ref|
FORMULAS = {
    "flash2": "u·|ref| + 1e-5·max|ref|",
    "flash1": "Tc·u·max|V| + 1e-5·max|ref|",
    "ring": "u·|ref| + u·max|V| + 1e-5·max|ref|",
    "standard": "((e^(2u·max|S|) − 1)(1 + u) + u)·max|V| + u·|ref| + 1e-5·max|ref|",
}


@dataclass(frozen=True)
class Tolerance:
    """|o − ref| ≤ relative·|ref| + absolute, elementwise; `formula` as the README writes it."""

    relative: float
    absolute: float
    formula: str

    def bound(self, ref: np.ndarray) -> np.ndarray:
        """The bound for each element of the reference."""
        return self.relative * np.abs(ref) + self.absolute


def stated(algorithm: str) -> bool:
    """Whether a bound is stated for `algorithm` (a newly registered one has none until it is derived)."""
    return algorithm in FORMULAS


def tolerance(
    algorithm: str, dtype: str, *, ref_max: float, v_max: float, s_max: float = 0.0, nk: int = 1, block_cols: int = 1
) -> Tolerance:
    """The bound for `algorithm` storing in `dtype` ("fp16", "bf16", "fp32"): max|ref|, max|V| and max|S| over
    the heads compared, and Nk, Bc for Algorithm 1's Tc = ⌈Nk/Bc⌉ round trips."""
    floor = FLOOR * ref_max
    if dtype == "fp32":
        return Tolerance(0.0, floor, "1e-5·max|ref|")
    if not stated(algorithm):
        raise KeyError(f"no tolerance is stated for {algorithm!r}")
    u = U[dtype]
    if algorithm == "flash2":
        return Tolerance(u, floor, FORMULAS[algorithm])
    if algorithm == "ring":
        return Tolerance(u, u * v_max + floor, FORMULAS[algorithm])
    if algorithm == "flash1":
        return Tolerance(0.0, ceil(nk / block_cols) * u * v_max + floor, FORMULAS[algorithm])
    return Tolerance(u, (expm1(2 * u * s_max) * (1 + u) + u) * v_max + floor, FORMULAS[algorithm])


def output_bound(algorithm: str, dtype: str, ref: np.ndarray, v: np.ndarray, nk: int, block_cols: int) -> np.ndarray:
    """The elementwise bound on |O − ref| of one head: ref (N, d) float64, v (Nk, d) as stored."""
    tol = tolerance(algorithm, dtype, ref_max=float(np.abs(ref).max(initial=0.0)),
                    v_max=float(np.abs(v.astype(np.float64)).max(initial=0.0)), nk=nk, block_cols=block_cols)  # fmt: skip
    return tol.bound(ref)


def lse_bound(ref_lse: np.ndarray) -> float:
    """The bound on |lse − ref| over the rows that see some key (ref −∞ marks the others)."""
    seen = np.isfinite(ref_lse)
    return FLOOR * max(1.0, float(np.abs(ref_lse[seen]).max())) if seen.any() else 0.0


def gradient_bound(ref: np.ndarray) -> float:
    """The bound on |g − ref| for a gradient stored in fp32 (never 0: an all-zero gradient allows float32's tiny)."""
    return FLOOR * max(float(np.abs(ref).max(initial=0.0)), float(np.finfo(np.float32).tiny))
