"""GQA's backward, per-head schedule: dK, dV summed over each group's g query heads (a kernel of its own).

Each query head's program wrote its own dK_h, dV_h (Nk, d); this kernel reads the g of a group, block by
block of Bc keys, and writes their sum. HBM traffic: 2·g·Nk·d·s read, 2·Nk·d·s written; (g − 1) adds an
element. The packed schedule needs none of it: its dK_j, dV_j accumulate every head of the group on chip.
"""

from math import ceil

import numpy as np

from sim.machine.memory import Chip


def backward(chip: Chip, *, Bc: int, group: int) -> None:
    """Read dK_heads, dV_heads (g·Nk, d: head t's rows t·Nk …) from HBM; write dK, dV (Nk, d)."""
    heads = chip.hbm.tensors["dK_heads"]
    Nk, d = heads.shape[0] // group, heads.shape[1]
    for name in ("dK", "dV"):
        chip.hbm.alloc(name, (Nk, d), heads.dtype)
        for j in range(ceil(Nk / Bc)):
            c0, c1 = j * Bc, min((j + 1) * Bc, Nk)
            with chip.step("load", None, f"Load {name} of head 0 of the group, keys K_j", j=j, phase="group sum"):
                acc = chip.load(f"{name}_j", f"{name}_heads", (c0, c1))  # (Bc, d) SRAM
            for t in range(1, group):
                with chip.step("compute", None, f"On chip, {name}_j ← {name}_j + {name} of head {t}", i=t, j=j):
                    tile = chip.load(f"{name}_t", f"{name}_heads", (t * Nk + c0, t * Nk + c1))  # (Bc, d) SRAM
                    acc = chip.put(f"{name}_j", acc + tile)  # (Bc, d) float32
                    chip.elementwise(tile.size)  # +
                chip.free(f"{name}_t")
            with chip.step("store", None, f"Write {name}_j to HBM", j=j, phase="group sum"):
                chip.store(name, np.asarray(acc), (c0, c1))
            chip.free(f"{name}_j")
