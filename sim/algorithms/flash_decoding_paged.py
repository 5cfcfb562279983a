"""Flash-Decoding on a paged KV cache (vLLM's PagedAttention layout, FlashAttention's `block_table`).

The cache is pages of `page_size` key rows, K_cache and V_cache (num_pages · page_size, d) for one K/V head;
a sequence's keys are the first `seqlen` rows of its pages block_table[0], block_table[1], … in that order.
Split p takes a run of the sequence's pages: it reads its block-table entries (int32) from HBM, then each
page as one K_j, V_j tile (whole pages; the last one only up to seqlen) through FlashAttention-2's inner
loop, and writes its partial O_p, lse_p; `flash_decoding.combine` merges them. With GQA the g query heads
of the K/V head are one Q of g·Nq rows (FlashAttention packs them at decode time), so each page is read once.
"""

from math import ceil

import numpy as np

from sim.algorithms.flash_decoding import alloc_outputs, attend, combine, finish
from sim.algorithms.scores import Scores
from sim.algorithms.softmax import SoftmaxState
from sim.core.dtypes import ACCUMULATOR
from sim.machine.blocks import chunks
from sim.machine.memory import Chip


def split_pages(chip: Chip, *, page_size: int, seqlen: int, splits: int, scale: float, scores: Scores) -> None:
    """Kernel 1: split p reads its block-table entries, Q and its pages of K, V; writes O_p, lse_p (or O, L)."""
    Q = chip.hbm.tensors["Q"]
    Nq, d = Q.shape
    alloc_outputs(chip, splits)
    for p, (j0, j1) in enumerate(chunks(ceil(seqlen / page_size), splits)):  # a run of pages per thread block
        with chip.step("load", None, "Load the split's block-table entries from HBM", i=p, phase="split"):
            table = chip.load("block_table_p", "block_table", (j0, j1)).astype(np.int64)  # (pages,) int32 in HBM
        with chip.step("load", None, "Load Q from HBM to on-chip SRAM (every split reads it)", i=p, phase="split"):
            Q_p = chip.load("Q", "Q")  # (Nq, d) SRAM
        with chip.step("init", None, "On chip, initialize O_p = 0, ℓ = 0, m = −∞", i=p, phase="split"):
            O_p = chip.put("O_p", np.zeros((Nq, d)))  # (Nq, d) SRAM accumulator
            empty = SoftmaxState.empty(Nq, ACCUMULATOR)
            ℓ, m = chip.put("ℓ", empty.ℓ), chip.put("m", empty.m)  # (Nq,) SRAM
        for j, page in zip(range(j0, j1), table, strict=True):
            cols = (j * page_size, min((j + 1) * page_size, seqlen))  # the keys, in the sequence's order
            rows = (page * page_size, page * page_size + cols[1] - cols[0])  # where they sit in the cache
            with chip.step("load", None, f"Load page {page} (keys {cols[0]}…{cols[1] - 1}) of K, V", p, j, "split"):
                K_j = chip.load("K_j", "K_cache", rows)  # (page_size, d) SRAM; the last page partial
                V_j = chip.load("V_j", "V_cache", rows)
            m, ℓ, O_p = attend(chip, Q_p, K_j, V_j, (m, ℓ, O_p), scale, scores, cols, p, j)
        chip.free("block_table_p")
        finish(chip, splits, p, m, ℓ, O_p)


def forward(chip: Chip, *, page_size: int, seqlen: int, splits: int, scale: float, scores: Scores) -> None:
    """Both kernels (only the first with one split)."""
    split_pages(chip, page_size=page_size, seqlen=seqlen, splits=splits, scale=scale, scores=scores)
    if splits > 1:
        combine(chip, splits=splits)
