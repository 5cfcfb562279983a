"""The causal mask, aligned bottom-right: query r (of N) sees key c (of Nk) iff c ≤ r + Nk − N."""

import numpy as np


def visible(r0: int, r1: int, c0: int, c1: int, N: int, Nk: int) -> np.ndarray:
    """Which keys c0…c1−1 each query r0…r1−1 may see, as a (r1 − r0, c1 − c0) bool array."""
    r = np.arange(r0, r1)[:, None]
    c = np.arange(c0, c1)[None, :]
    return c <= r + (Nk - N)


def block_seen(r1: int, c0: int, N: int, Nk: int) -> bool:
    """Whether any query of a block ending at row r1 sees any key of a block starting at column c0."""
    return c0 <= r1 - 1 + Nk - N


def block_fully_seen(r0: int, c1: int, N: int, Nk: int) -> bool:
    """Whether every query of a block starting at row r0 sees every key of a block ending at column c1."""
    return c1 - 1 <= r0 + Nk - N


def hide(chip, S: np.ndarray, rows: tuple[int, int], cols: tuple[int, int], N: int, Nk: int) -> np.ndarray:
    """The tile S of scores for `rows` × `cols` with −∞ where the mask hides a key, the select booked on
    `chip` as elementwise work; a tile every query sees entirely is returned as it is, at no cost."""
    if block_fully_seen(rows[0], cols[1], N, Nk):
        return S
    chip.elementwise(S.size)
    return np.where(visible(*rows, *cols, N, Nk), S, -np.inf)
