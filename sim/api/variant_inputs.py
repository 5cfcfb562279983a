"""The LLM variants' arguments, checked (a one-line InputError naming the argument): GQA, window, ALiBi, softcap."""

from dataclasses import dataclass

import numpy as np

from sim.algorithms.scores import Scores
from sim.core.errors import InputError
from sim.machine.mask import rule

TAKES = {  # which listings take which variant (GQA's per-head schedule: every one)
    "window": ("flash2",),
    "alibi_slopes": ("flash2",),
    "softcap": ("flash2",),
    "pack_gqa": ("flash2",),
}


@dataclass(frozen=True)
class Variant:
    """A pass's variant, checked: window sides (−1 unbounded), ALiBi slopes (B, Hq), softcap, GQA group and
    schedule. `plain` when none is used (g = 1, nothing added to S_ij)."""

    window: tuple[int, int] | None = None
    alibi_slopes: np.ndarray | None = None  # (B, Hq) float32
    softcap: float | None = None
    group: int = 1  # g = Hq / Hkv
    pack_gqa: bool = False  # one program per K/V head, its g query heads' rows interleaved

    @property
    def scored(self) -> bool:
        """Whether the listing needs a `Scores` beyond the causal mask."""
        return self.window is not None or self.alibi_slopes is not None or self.softcap is not None or self.pack_gqa

    def scores(self, N: int, Nk: int, causal: bool, b: int, heads: range) -> Scores:
        """The score line of the program that takes query heads `heads` of batch b (packed: a whole group)."""
        slopes = None if self.alibi_slopes is None else self.alibi_slopes[b, heads.start : heads.stop]
        return Scores(rule(N, Nk, causal, self.window, len(heads) if self.pack_gqa else 1), self.softcap, slopes)

    def about(self) -> dict:
        """What a trace's settings say of the variant (only what is used)."""
        about = {"window": None if self.window is None else list(self.window), "softcap": self.softcap}
        return {k: v for k, v in about.items() if v is not None} | (
            {"alibi": True} if self.alibi_slopes is not None else {}
        )

    def options(self) -> dict:
        """The variant as `sim.run`'s keyword arguments (what a Result keeps for its backward)."""
        slopes = self.alibi_slopes
        return dict(window=self.window, alibi_slopes=slopes, softcap=self.softcap, pack_gqa=self.pack_gqa)


def check_variant(
    algorithm: str, q: np.ndarray, k: np.ndarray, window=None, alibi_slopes=None, softcap=None, pack_gqa=False,
    dropout_p: float = 0.0,
) -> Variant:  # fmt: skip
    """Each variant argument checked against the algorithm and q (…, Hq, N, d), k (…, Hkv, Nk, d)."""
    given = {"window": window, "alibi_slopes": alibi_slopes, "softcap": softcap, "pack_gqa": pack_gqa or None}
    for name, value in given.items():
        if value is not None and algorithm not in TAKES[name]:
            raise InputError(
                f"{name}: {algorithm} does not take {name} here; {', '.join(TAKES[name])} does "
                "(standard and flash1 take GQA's per-head schedule only)"
            )
    batch, Hq = (q.shape[0], q.shape[1]) if q.ndim == 4 else (1, 1)
    group = Hq // (k.shape[1] if k.ndim == 4 else 1)
    if pack_gqa and q.ndim != 4:
        raise InputError(
            f"pack_gqa: packs the query heads that share a K/V head, and q {tuple(q.shape)} has one head: give "
            "q (B, Hq, N, d), k and v (B, Hkv, Nk, d) (the CLI: --heads, --kv-heads)"
        )
    if pack_gqa and dropout_p > 0:
        raise InputError("pack_gqa: the packed schedule draws no dropout mask here; use pack_gqa=False with dropout_p")
    return Variant(
        check_window(window), check_alibi(alibi_slopes, batch, Hq), check_softcap(softcap), group, bool(pack_gqa)
    )


def check_window(window) -> tuple[int, int] | None:
    """(left, right), each an integer ≥ −1 or None (−1 and None: unbounded on that side)."""
    if window is None:
        return None
    if isinstance(window, (str, bytes)) or not hasattr(window, "__len__") or len(window) != 2:
        raise InputError(f"window: must be a pair (left, right), got {window!r}")
    sides = []
    for w in window:
        if w is None:
            w = -1
        if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < -1:
            raise InputError(f"window: each side must be an integer ≥ −1 (−1 or None: unbounded), got {window!r}")
        sides.append(int(w))
    return sides[0], sides[1]


def check_softcap(softcap) -> float | None:
    """A finite c > 0, or None (no softcap)."""
    if softcap is None:
        return None
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float, np.floating, np.integer)):
        raise InputError(f"softcap: must be a number c > 0, got {softcap!r}")
    if not np.isfinite(softcap) or softcap <= 0:
        raise InputError(f"softcap: must be finite and > 0 (S ← c·tanh(S/c)), got {softcap!r}")
    return float(softcap)


def check_alibi(alibi_slopes, batch: int, Hq: int) -> np.ndarray | None:
    """ALiBi slopes of shape (Hq,) or (batch, Hq), finite, as a (batch, Hq) float32 array."""
    if alibi_slopes is None:
        return None
    try:
        slopes = np.asarray(alibi_slopes, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError(f"alibi_slopes: not an array of numbers ({e})") from None
    if slopes.shape not in ((Hq,), (batch, Hq)):
        raise InputError(f"alibi_slopes: shape {slopes.shape}; expected ({Hq},) or ({batch}, {Hq}), one per query head")
    if not np.isfinite(slopes).all() or np.abs(slopes).max(initial=0) > 1e30:
        raise InputError("alibi_slopes: must be finite (and within float32)")
    return np.broadcast_to(slopes, (batch, Hq)).astype(np.float32)
