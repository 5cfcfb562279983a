"""GQA's two schedules as programs: each query head reading its group's K/V, or one program per group (packed).

With g = Hq / Hkv query heads per K/V head, query head h reads K/V head h // g. Per head, B·Hq programs each
read their group's K and V, so K/V traffic is that of Hq heads. Packed (FlashAttention's "pack GQA"), one
program takes a group's g query heads as one Q of g·N rows, interleaved (row n·g + t is position n of head
t, so that a block of rows spans few positions and masks still skip blocks), and reads K and V once.
"""

import numpy as np

from sim.algorithms import gqa_sum
from sim.api.heads import Program, each_head, heads_of
from sim.api.variant_inputs import Variant


def interleave(x: np.ndarray) -> np.ndarray:
    """A group's g heads (g, N, …) as one (N·g, …) array: row n·g + t is row n of head t."""
    return np.moveaxis(x, 0, 1).reshape(x.shape[1] * x.shape[0], *x.shape[2:])


def deinterleave(y: np.ndarray, g: int) -> np.ndarray:
    """`interleave` undone: (N·g, …) back to (g, N, …)."""
    return np.moveaxis(y.reshape(y.shape[0] // g, g, *y.shape[1:]), 1, 0)


def programs(q_like: dict, kv_like: dict, q_out: dict, kv_out: dict, *, group: int, packed: bool, options) -> list:
    """The programs of a (B, H, …) pass: `q_like` tensors (B, Hq, …) and `kv_like` (B, Hkv, …) placed in HBM,
    `q_out` filled per query head and `kv_out` per K/V head (packed) or per query head (an expanded (B, Hq, …)
    array, summed afterwards). `options(b, heads)` gives the listing's keyword arguments for query heads `heads`."""
    B, Hq = next(iter(q_like.values())).shape[:2]
    out = []
    if packed:
        for b in range(B):
            for hk in range(Hq // group):
                heads = range(hk * group, (hk + 1) * group)
                inputs = {n: interleave(x[b, heads.start : heads.stop]) for n, x in q_like.items()}
                inputs |= {n: x[b, hk] for n, x in kv_like.items()}
                about = {"query_heads": [heads.start, heads.stop - 1], "kv_head": hk}
                out.append(
                    Program((b, heads.start), inputs, _store_group(q_out, kv_out, b, heads), options(b, heads), about)
                )
        return out
    for b in range(B):
        for h in range(Hq):
            inputs = {n: x[b, h] for n, x in q_like.items()} | {n: x[b, h // group] for n, x in kv_like.items()}
            about = {"kv_head": h // group, "group": group} if group > 1 else {}
            outputs = {n: x[b, h] for n, x in (q_out | kv_out).items()}
            store = _store_head(q_out | kv_out, b, h)
            out.append(Program((b, h), inputs, store, options(b, range(h, h + 1)), about, destinations=outputs))
    return out


def _store_head(outputs: dict, b: int, h: int):
    def store(tensors: dict) -> None:
        for name, x in outputs.items():
            if not np.may_share_memory(x[b, h], tensors[name]):  # else HBM allocated it there (`Program.destinations`)
                x[b, h] = tensors[name]

    return store


def _store_group(q_out: dict, kv_out: dict, b: int, heads: range):
    def store(tensors: dict) -> None:
        for name, x in q_out.items():
            x[b, heads.start : heads.stop] = deinterleave(tensors[name], len(heads))
        for name, x in kv_out.items():
            x[b, heads.start // len(heads)] = tensors[name]

    return store


def of_variant(variant: Variant, costs: dict, q_like: dict, kv_like: dict, q_out: dict, kv_out: dict) -> list:
    """The pass's programs: one per (batch, head), or GQA's (per head, or packed per group) with their scores."""

    def options(b: int, heads: range) -> dict:
        if not variant.scored:
            return {}
        return {"scores": variant.scores(costs["n"], costs["nk"], costs["causal"], b, heads)}

    if q_like["Q"].ndim == 2:  # one head
        (program,) = heads_of(q_like | kv_like, q_out | kv_out)
        program.options = options(0, range(1))
        return [program]
    if variant.group == 1 and not variant.scored:
        return heads_of(q_like | kv_like, q_out | kv_out)

    return programs(q_like, kv_like, q_out, kv_out, group=variant.group, packed=variant.pack_gqa, options=options)


def group_sum(costs: dict, each: dict, k: np.ndarray, g: int) -> dict:
    """dK, dV of each query head (B, Hq, Nk, d) summed over each group by `gqa_sum`, its costs added to `costs`."""
    B, Hkv, Nk, d = k.shape
    out = {name: np.empty(k.shape, k.dtype) for name in ("dK", "dV")}
    inputs = {f"{name}_heads": x.reshape(B, Hkv, g * Nk, d) for name, x in each.items()}
    summed = each_head(
        costs, "GQA group sum", "counts", None, inputs, out,
        lambda chip, n: gqa_sum.backward(chip, Bc=costs["block_cols"], group=g),
    )  # fmt: skip
    costs["ledger"].add(summed["ledger"])
    costs["sram_peak_bytes"] = max(costs["sram_peak_bytes"], summed["sram_peak_bytes"])
    return out
