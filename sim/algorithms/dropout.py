"""Dropout as in FlashAttention's Algorithm 2: only a seed is kept; every tile's mask is drawn again from it.

The generator is counter-based, like the Philox generator FlashAttention's CUDA code
uses: the draw for score (r, c) of head h is a pure function of (seed, h, r, c). So the
mask of a tile — rows r0…r1−1 of a row block, columns c0…c1−1 of a column block — is
keyed by the seed and the two blocks alone, and the backward pass regenerates exactly
the mask the forward pass used, whatever order (or tiling) it visits the tiles in. No
mask is ever written to HBM.

The draws are SplitMix64 (Steele, Lea and Flood, 2014): the output number
r·2³² + c + 1 of a stream started from (seed, h).
"""

from dataclasses import dataclass

import numpy as np

from sim.core.errors import InputError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64's increment, 2⁶⁴ / φ


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function: a bijection of uint64 that scrambles every bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uniform(seed: int, head: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    """Uniform draws in [0, 1) for scores r0…r1−1 × c0…c1−1 of head `head`, a (r1 − r0, c1 − c0) array."""
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps modulo 2⁶⁴ by design
        stream = _mix(np.array([seed], np.uint64) ^ _mix(np.array([head], np.uint64) + _GOLDEN))
        r = np.arange(r0, r1, dtype=np.uint64)[:, None]
        c = np.arange(c0, c1, dtype=np.uint64)[None, :]
        counter = (r << np.uint64(32)) + c + np.uint64(1)
        bits = _mix(stream + counter * _GOLDEN)
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


@dataclass(frozen=True)
class Dropout:
    """Drop each attention probability with probability `p`; keep the rest scaled by 1/(1 − p)."""

    p: float
    seed: int
    head: int = 0  # which (batch, head) this is, flattened: every head draws its own mask

    def mask(self, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """Z_ij for rows [r0, r1) × columns [c0, c1): 1/(1 − p) where kept, 0 where dropped (float32)."""
        keep = uniform(self.seed, self.head, *rows, *cols) >= self.p
        return (keep / (1.0 - self.p)).astype(np.float32)


def matrix(p: float, seed: int, N: int, Nk: int, head: int = 0) -> np.ndarray:
    """The whole (N, Nk) mask Z of one head, as the tiles regenerate it (for the float64 reference)."""
    return Dropout(p, seed, head).mask((0, N), (0, Nk))


def check(dropout_p, seed, *, seed_needed: bool) -> tuple[float, int | None]:
    """Validate dropout_p ∈ [0, 1) and a seed in [0, 2⁶⁴); returns them as (float, int or None)."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float, np.floating)):
        raise InputError(f"dropout_p: must be a number in [0, 1), got {dropout_p!r}")
    if not 0.0 <= float(dropout_p) < 1.0:
        raise InputError(f"dropout_p: must be in [0, 1) (the probability of dropping a score), got {dropout_p!r}")
    if seed is None:
        if seed_needed and dropout_p > 0:
            raise InputError("seed: dropout_p > 0 needs the forward pass's seed (Result.seed) to regenerate its mask")
        return float(dropout_p), None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
        raise InputError(f"seed: must be an integer in [0, 2**64), got {seed!r}")
    return float(dropout_p), int(seed)
