"""Flash-Decoding on a paged KV cache: the arguments checked, one program per (sequence, K/V head), the pages read.

k_cache, v_cache are (num_pages, page_size, Hkv, d); sequence b's keys are the first cache_seqlens[b] rows of
its pages block_table[b, 0], block_table[b, 1], … (FlashAttention's `flash_attn_with_kvcache`, vLLM's layout).
q is (B, Hq, Nq, d), Hq a multiple of Hkv: each program packs the g query heads of one K/V head.
"""

from math import ceil

import numpy as np

from sim.algorithms import flash_decoding_paged
from sim.algorithms.scores import Scores
from sim.api.gqa import deinterleave, interleave
from sim.api.heads import Program, each_program
from sim.api.inputs import RECORDS, check_choice, check_hardware, check_inputs, check_positive, check_scale
from sim.api.results import Decoded
from sim.api.variant_inputs import check_variant
from sim.core.dtypes import dtype_name
from sim.core.errors import InputError
from sim.machine.blocks import chunks, decoding_footprint
from sim.machine.mask import rule
from sim.machine.occupancy import best_splits, blocks_per_sm, occupancy


def decode(
    q, k_cache, v_cache, block_table, cache_seqlens, *, splits=None, causal=False, scale=None, sram_bytes=None,
    hardware=None, record="counts", window=None, alibi_slopes=None, softcap=None,
) -> Decoded:  # fmt: skip
    """`sim.decode` on a paged cache (see the module's docstring); `splits` is capped at each sequence's pages."""
    check_choice("record", record, RECORDS)
    for name, x in (("k_cache", k_cache), ("v_cache", v_cache)):
        if np.ndim(x) != 4:
            raise InputError(f"{name}: shape {np.shape(x)}; a paged cache is (num_pages, page_size, Hkv, d)")
    if np.ndim(q) != 4:
        raise InputError(f"q: shape {np.shape(q)}; decoding on a paged cache takes q as (B, Hq, Nq, d)")
    num_pages, page_size, Hkv, d = np.shape(k_cache)
    B, Hq, Nq = np.shape(q)[:3]
    caches = [np.moveaxis(np.asarray(c), 2, 0).reshape(Hkv, num_pages * page_size, d) for c in (k_cache, v_cache)]
    q, k, _ = check_inputs(q, *(np.broadcast_to(c, (B, *c.shape)) for c in caches))  # (B, Hkv, pages · size, d)
    seqlens, table = check_pages(block_table, cache_seqlens, B, num_pages, page_size)
    g = Hq // Hkv
    variant = check_variant("flash2", q, k, window, alibi_slopes, softcap, g > 1)
    s, scale = q.dtype.itemsize, check_scale(scale, d)
    hw, M = check_hardware(hardware, sram_bytes)
    pages = [ceil(n / page_size) for n in seqlens]
    if splits is None:
        splits = best_splits(B * Hkv, 1, g * Nq, int(seqlens.max()), d, s, hw, page_size=page_size)
    check_positive("splits", splits)
    most = max(max(j1 - j0 for j0, j1 in chunks(n, min(splits, n))) for n in pages)
    need = sum(decoding_footprint(g * Nq, page_size, d, s, min(splits, max(pages))).values()) + 4 * most
    if need > M:
        raise InputError(f"page_size: pages of {page_size} keys need {need:,} B of SRAM for Flash-Decoding "
                         f"(a page of K and V, the scores, the block-table entries) but the SRAM holds {M:,} B")  # fmt: skip
    costs = dict(
        algorithm="decode", block_rows=g * Nq, block_cols=page_size, sram_bytes=M, scale=scale, causal=causal,
        dtype=dtype_name(q.dtype), hardware=hw, heads=B * Hq, n=Nq, nk=int(seqlens.max()), d=d,
    )  # fmt: skip
    O, L = np.empty(q.shape, q.dtype), np.empty(q.shape[:3], np.float32)
    programs = []
    for b in range(B):
        for hk in range(Hkv):
            heads = range(hk * g, (hk + 1) * g)
            inputs = {"Q": interleave(q[b, heads.start : heads.stop]), "block_table": table[b, : pages[b]]}
            inputs |= {name: c[hk] for name, c in zip(("K_cache", "V_cache"), caches, strict=True)}
            slopes = None if variant.alibi_slopes is None else variant.alibi_slopes[b, heads.start : heads.stop]
            scores = Scores(rule(Nq, int(seqlens[b]), causal, variant.window, g), variant.softcap, slopes)
            options = dict(seqlen=int(seqlens[b]), splits=min(splits, pages[b]), scores=scores)
            programs.append(Program((b, heads.start), inputs, _store(O, L, b, heads), options))
    costs |= each_program(
        costs, "decode (paged)", record, None, programs,
        lambda chip, n, **o: flash_decoding_paged.forward(chip, page_size=page_size, scale=scale, **o),
        splits=splits, page_size=page_size,
    )  # fmt: skip
    occ = occupancy(B * Hkv, 1, splits, g * Nq, int(seqlens.max()), d, s, hw, page_size, blocks_per_sm(page_size))
    return Decoded(
        **costs, **variant.options(), output=O, lse=L, splits=splits, occupancy=occ, page_size=page_size,
        cache_seqlens=seqlens,
    )  # fmt: skip


def check_pages(block_table, cache_seqlens, B: int, num_pages: int, page_size: int) -> tuple[np.ndarray, np.ndarray]:
    """cache_seqlens (B,) in 1 … pages per sequence × page_size; block_table (B, pages per sequence) of integers,
    every entry a sequence uses inside 0 … num_pages − 1."""
    if block_table is None or cache_seqlens is None:
        missing = "block_table" if block_table is None else "cache_seqlens"
        raise InputError(f"{missing}: a paged cache needs both block_table and cache_seqlens")
    table, seqlens = np.asarray(block_table), np.asarray(cache_seqlens)
    if table.ndim != 2 or table.shape[0] != B or not np.issubdtype(table.dtype, np.integer) or table.shape[1] < 1:
        raise InputError(
            f"block_table: must be integers shaped ({B}, pages per sequence), got {table.dtype} {table.shape}"
        )
    if seqlens.shape != (B,) or not np.issubdtype(seqlens.dtype, np.integer):
        raise InputError(f"cache_seqlens: must be {B} integers (one per sequence), got {seqlens.dtype} {seqlens.shape}")
    longest = table.shape[1] * page_size
    if ((seqlens < 1) | (seqlens > longest)).any():
        b = int(np.argmax((seqlens < 1) | (seqlens > longest)))
        raise InputError(f"cache_seqlens: sequence {b} has {int(seqlens[b])} keys; choose 1 … {longest} "
                         f"({table.shape[1]} pages of {page_size} in block_table)")  # fmt: skip
    for b, n in enumerate(seqlens):
        used = table[b, : ceil(int(n) / page_size)]
        bad = (used < 0) | (used >= num_pages)
        if bad.any():
            j = int(np.argmax(bad))
            raise InputError(f"block_table: entry [{b}, {j}] = {int(used[j])} points past the cache's {num_pages} "
                             f"pages; choose 0 … {num_pages - 1}")  # fmt: skip
    return seqlens.astype(np.int64), table.astype(np.int32)


def _store(O: np.ndarray, L: np.ndarray, b: int, heads: range):
    def store(tensors: dict) -> None:
        O[b, heads.start : heads.stop] = deinterleave(tensors["O"], len(heads))
        L[b, heads.start : heads.stop] = deinterleave(tensors["L"], len(heads))

    return store
