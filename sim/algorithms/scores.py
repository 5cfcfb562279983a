"""What FlashAttention does to a tile of scores before its softmax: softcap, ALiBi, the mask — and back again.

On chip, after S_ij = τ Q_i K_jᵀ (FlashAttention's order, `sim.api.reference_variants` the definition):
  softcap c    T_ij = tanh(S_ij / c), S_ij ← c·T_ij           1 tanh (counted as an exp: one MUFU op) + 2 elementwise
  ALiBi        S_ij ← S_ij − slope·|p + Nk − N − c|           2 elementwise (·slope, −); p the row's position
  mask         S_ij ← −∞ where `sim.machine.mask.Rule` hides a key     1 elementwise, on tiles not seen in full
The backward takes dS_ij through the softcap: dS_ij ← dS_ij ∘ (1 − T_ij²), 3 elementwise (T², 1 −, ∘).
"""

from dataclasses import dataclass

import numpy as np

from sim.machine.mask import Rule


@dataclass(frozen=True)
class Scores:
    """One program's score line: its mask rule, softcap c (None: none) and ALiBi slopes, one per query head of
    its rows (row r belongs to head r % rule.group), or None."""

    rule: Rule
    softcap: float | None = None
    slopes: np.ndarray | None = None  # (group,) float32

    @property
    def hiding(self) -> str:
        """What hides a skipped tile, as a step's text says it: "causal mask" or "window"."""
        return "window" if self.rule.left is not None or (self.rule.right or 0) > 0 else "causal mask"

    @property
    def lines(self) -> str:
        """What the step computing S_ij adds to τ Q_i K_jᵀ, as its text says it ("" for none)."""
        added = ["c·tanh(S_ij/c)"] * (self.softcap is not None) + ["ALiBi −slope·|i − j|"] * (self.slopes is not None)
        return f", then {', '.join(added)}" if added else ""

    def apply(self, chip, S: np.ndarray, rows: tuple[int, int], cols: tuple[int, int]):
        """(S_ij after softcap, ALiBi and the mask; T_ij = tanh(τ Q_i K_jᵀ / c) or None), booked on `chip`."""
        T = None
        if self.softcap is not None:
            T = np.tanh(S / self.softcap)  # (Br, Bc), in place of S_ij
            chip.ledger.work["exp"] += T.size  # tanh: one MUFU evaluation
            S = self.softcap * T
            chip.elementwise(2 * S.size)  # ÷c, ·c
        if self.slopes is not None:
            r = np.arange(*rows)
            p = r // self.rule.group + self.rule.Nk - self.rule.N  # each row's diagonal key
            slope = self.slopes[r % self.rule.group]  # (Br,)
            S = S - slope[:, None] * np.abs(p[:, None] - np.arange(*cols)[None, :])
            chip.elementwise(2 * S.size)  # ·slope, −
        if self.rule.masks:
            S = self.rule.hide(chip, S, rows, cols)
        return S, T

    def through_softcap(self, chip, dS: np.ndarray, T: np.ndarray | None) -> np.ndarray:
        """dS_ij with respect to τ Q_i K_jᵀ: through c·tanh(·/c), whose derivative is 1 − T_ij²."""
        if T is None:
            return dS
        chip.elementwise(3 * dS.size)  # T², 1 −, ∘
        return dS * (1 - T * T)


def plain(N: int, Nk: int, causal: bool) -> Scores:
    """The score line of plain (causal) attention: the mask alone."""
    return Scores(Rule(N, Nk, None, 0 if causal else None))
