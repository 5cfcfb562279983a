"""The sequences a run simulates, priced one length at a time: a padded batch's B of N × Nk, or a packed batch's
(--seqlens) own lengths, each sequence run alone with the blocks chosen for the longest (`sim.run_varlen`)."""

from collections import Counter
from math import ceil

from sim.cli import estimate
from sim.core.format import count, plural

EXACT = 64  # distinct lengths priced as they are; with more, each is rounded up to its LEADING_BITS leading bits
LEADING_BITS = 6  # (at most 3.2% longer), so a hostile list of 10⁵ lengths is priced in at most ~1,700 steps


def sequences(seqlens, n: int, nk: int, batch: int) -> dict[tuple[int, int], int]:
    """{(N, Nk): how many sequences}: `batch` of (N, Nk), or each --seqlens length (queries and keys alike)."""
    if seqlens is None:
        return {(n, nk): batch}
    lengths = Counter(seqlens)
    if len(lengths) > EXACT:
        lengths = Counter(round_up(m) for m in seqlens)
    return {(m, m): times for m, times in lengths.items()}


def round_up(m: int) -> int:
    """m rounded up to its LEADING_BITS leading binary digits (never shorter, at most 3.2% longer)."""
    shift = max(0, m.bit_length() - LEADING_BITS)
    return -(-m >> shift) << shift


def price(one, seqs: dict[tuple[int, int], int]) -> estimate.Estimate:
    """The sum of `one(N, Nk, times)` over the lengths: the sequences run one after another."""
    return sum((one(m, mk, times) for (m, mk), times in seqs.items()), estimate.Estimate())


def drawn(seqlens, heads: int, d: int) -> estimate.Estimate:
    """A packed batch's random inputs, drawn in float64 for every sequence at once (a tensor at a time)."""
    return estimate.Estimate(transient=8 * heads * d * sum(seqlens)) if seqlens else estimate.Estimate()


def describe(config: dict, seqlens, heads: int) -> str:
    """What a refusal names: `shape_of` and `tiles` for a padded batch; for a packed one its sequences, its rows and
    the tile pairs of all of them."""
    if seqlens is None:
        return f"{estimate.shape_of(config)} ({estimate.tiles(config)})"
    Br, Bc = config["block_rows"], config["block_cols"]
    pairs = sum(ceil(m / Br) * ceil(m / Bc) for m in seqlens)
    each = f", {count(heads)} heads each" if heads > 1 else ""
    return (f"a packed batch of {plural(len(seqlens), 'sequence')}, {count(sum(seqlens))} rows (the longest "
            f"N = {count(max(seqlens))}), d = {config['d']}{each} ({count(pairs)} tile pairs of {Br} × {Bc})")  # fmt: skip
