"""Closed forms of the LLM variants: GQA's two schedules, the window's skipped tiles, packed batches, the paged cache.

Built on `sim.machine.iomodel`'s (whose flash2 forward and backward take the mask `Rule`, a softcap and ALiBi) for
one program, then summed over the programs a pass launches. g = Hq / Hkv query heads share a K/V head:
  per head  B·Hq programs of N rows, each reading its group's K, V; the backward writes every head's
            dK_h, dV_h and a kernel of its own sums them over the group (`group_sum`);
  packed    B·Hkv programs of g·N interleaved rows (rule.group = g), K, V read once per Q block of the
            group; the backward accumulates the group's dK_j, dV_j on chip.
  grouped   (the backward only; the GPU kernels', FlashAttention-3's) B·Hkv programs per K/V block j, each walking
            its g query heads' Q blocks one head after the other: each head masked as its own, K_j, V_j read and
            dK_j, dV_j written once per K/V head, summed on chip.
"""

from math import ceil

from sim.algorithms import registry
from sim.machine import iomodel, mask
from sim.machine.blocks import chunks
from sim.machine.iomodel import Counts, Kernels, sum_counts


def group_sum(Nk: int, d: int, s: int, g: int) -> Counts:
    """`sim.algorithms.gqa_sum`: read the g heads' dK_h, dV_h, write their sums; g − 1 adds an element."""
    return Counts(2 * g * s * Nk * d, 2 * s * Nk * d, 0, 0, 2 * (g - 1) * Nk * d)


def program(
    algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, *, causal=False, dropout=False, window=None,
    softcap=False, alibi=False, group: int = 1, backward: bool = False,
) -> Kernels:  # fmt: skip
    """One program's kernels: `group` > 1 is the packed schedule's (g·N rows); flash2 takes every variant."""
    plain = window is None and not softcap and not alibi and group == 1
    if plain:
        return (registry.backward_kernels if backward else registry.kernels)(
            algorithm, N, Nk, d, s, Br, Bc, causal, dropout
        )
    rule = mask.rule(N, Nk, causal, window, group)
    variant = dict(rule=rule, softcap=softcap, alibi=alibi)
    if backward:
        return iomodel.flash2_backward_kernels(group * N, Nk, d, s, Br, Bc, causal, dropout, **variant)
    return [("FlashAttention-2 forward", iomodel.flash2(group * N, Nk, d, s, Br, Bc, causal, dropout, **variant))]


def gqa(
    algorithm: str, B: int, Hq: int, Hkv: int, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, *,
    pack_gqa: bool = False, backward: bool = False, **variant,
) -> Counts:  # fmt: skip
    """A whole pass of B × Hq query heads on Hkv K/V heads, in either schedule (`variant`: `program`'s)."""
    g = Hq // Hkv
    if pack_gqa:
        one = sum_counts(c for _, c in program(algorithm, N, Nk, d, s, Br, Bc, group=g, backward=backward, **variant))
        return one.times(B * Hkv)
    one = sum_counts(c for _, c in program(algorithm, N, Nk, d, s, Br, Bc, backward=backward, **variant))
    total = one.times(B * Hq)
    return total + group_sum(Nk, d, s, g).times(B * Hkv) if backward and g > 1 else total


def grouped_backward(
    B: int, Hq: int, Hkv: int, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, **variant
) -> Kernels:  # fmt: skip
    """The backward's kernels in the grouped schedule (`variant`: `program`'s): the per-head pass's, less the
    K_j, V_j reads and dK_j, dV_j writes of the g − 1 heads that share them (no `group_sum`)."""
    shared = 2 * s * Nk * d * B * (Hq - Hkv)  # K and V of a K/V head, one way, for each head past the first
    (prepass, pre), (name, main) = program("flash2", N, Nk, d, s, Br, Bc, backward=True, **variant)
    main = main.times(B * Hq)
    grouped = Counts(main.hbm_read_bytes - shared, main.hbm_write_bytes - shared, main.flops, main.exps,
                     main.elementwise)  # fmt: skip
    return [(prepass, pre.times(B * Hq)), (name, grouped)]


def skipped_tiles(N: int, Nk: int, Br: int, Bc: int, causal=False, window=None, group: int = 1) -> int:
    """Tiles of one program that the mask hides entirely: Tr·Tc less those some row sees."""
    blocks = iomodel.row_blocks(group * N, Nk, Br, Bc, causal, mask.rule(N, Nk, causal, window, group))
    return len(blocks) * ceil(Nk / Bc) - sum(b.seen for b in blocks)


def decoding(
    Nq: int, Nk: int, d: int, s: int, Bc: int, splits: int, causal=False, *, group: int = 1, window=None,
    softcap=False, alibi=False, page_size: int | None = None,
) -> Kernels:  # fmt: skip
    """Flash-Decoding of one K/V head and its `group` query heads (packed: g·Nq rows); with `page_size`, on a paged
    cache: tiles are pages (Bc = page_size), split p takes a run of them and reads their block-table entries
    (4 bytes each), so every page is read whole but the last, read up to Nk."""
    rule = mask.rule(Nq, Nk, causal, window, group)
    variant = dict(rule=rule, softcap=softcap, alibi=alibi)
    if page_size is None:
        return iomodel.decoding(group * Nq, Nk, d, s, Bc, splits, causal, **variant)
    pages = ceil(Nk / page_size)
    bounds = [(j0 * page_size, min(j1 * page_size, Nk)) for j0, j1 in chunks(pages, splits)]
    (name, split), *merge = iomodel.decoding(group * Nq, Nk, d, s, page_size, splits, causal, bounds=bounds, **variant)
    table = Counts(4 * pages, 0, 0, 0, 0)  # the block table's int32 entries, each read by its split
    return [(name, split + table), *merge]
