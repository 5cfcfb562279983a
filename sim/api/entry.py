"""The entry points: run a forward pass, its backward, or Flash-Decoding through the memory model, or count one."""

from dataclasses import replace

import numpy as np

from sim.algorithms import flash_decoding
from sim.algorithms.dropout import Dropout
from sim.algorithms.registry import REGISTRY, get
from sim.api import gqa, paged, reference_variants, varlen_backward
from sim.api.heads import each_program
from sim.api.inputs import (
    RECORDS,
    check_choice,
    check_dropout,
    check_hardware,
    check_inputs,
    check_like_q,
    check_positive,
    check_row,
    check_saved,
    check_scale,
    configure,
    random_head,
)
from sim.api.results import Decoded, Gradients, Packed, Result
from sim.api.variant_inputs import check_variant
from sim.core.dtypes import dtype_name
from sim.core.errors import InputError
from sim.machine.blocks import decoding_blocks
from sim.machine.ledger import Ledger
from sim.machine.occupancy import best_splits, occupancy

ALGORITHMS = tuple(REGISTRY)  # the forward passes `run` and `count` take, by name
VARIANTS = ("window", "alibi_slopes", "softcap", "pack_gqa")  # what a Result carries for its backward, beside:
CARRIED = ("causal", "scale", "dropout_p", "seed", *VARIANTS)


def run(
    algorithm: str, q, k, v, *, causal: bool = False, scale: float | None = None, block_rows: int | None = None,
    block_cols: int | None = None, blocks: str = "fit", sram_bytes: int | None = None, hardware=None,
    record: str = "counts", row: int | None = None, dropout_p: float = 0.0, seed: int | None = None,
    window=None, alibi_slopes=None, softcap: float | None = None, pack_gqa: bool = False,
) -> Result:  # fmt: skip
    """Run `algorithm` ("standard", "flash1" or "flash2") on q (N, d), k and v (Nk, d) — or (B, H, ·, d).

    GQA: q (B, Hq, N, d) with k, v (B, Hkv, Nk, d), Hq a multiple of Hkv; each query head reads its
    group's K/V, or with `pack_gqa` one program takes the group's heads and reads K/V once (flash2).
    flash2 also takes `window` (left, right) (−1 or None: unbounded; bottom-right like causal),
    `alibi_slopes` (Hq,) or (B, Hq) adding −slope·|i + Nk − N − j| (FlashAttention's convention) and
    `softcap` c: S ← c·tanh(S/c) before the bias (`sim.api.reference_variants` is the definition).

    The inputs' dtype is the storage dtype (float16, bfloat16 or float32; float64 is stored
    as float32). Blocks not given are chosen by `blocks`: "fit" (the largest that fit the
    SRAM) or "paper" (the paper's rule, refused with the buffer sizes if it does not fit).
    `hardware` is a preset name or a `sim.machine.hardware.Hardware`; `sram_bytes` overrides its SRAM.
    `record` is "counts", "steps" (a Trace of the first head) or "values" (with values);
    `row` keeps the values of that one query row only, which keeps big traces small.
    `dropout_p` > 0 drops attention probabilities (flash1, flash2) with a mask drawn from
    `seed` (a fresh one if None, returned as `Result.seed`), as FlashAttention's Algorithm 2.
    The Result keeps the inputs and what the forward left in HBM, so `sim.backward(result, do)` works.
    """
    entry = get(algorithm)
    dropout_p, seed = check_dropout(entry, dropout_p, seed, seed_needed=False)
    if dropout_p > 0 and seed is None:
        seed = int(np.random.default_rng().integers(2**63))
    check_choice("record", record, RECORDS)
    q, k, v = check_inputs(q, k, v)
    variant = check_variant(algorithm, q, k, window, alibi_slopes, softcap, pack_gqa, dropout_p)
    costs = configure(algorithm, False, q, k, scale, causal, block_rows, block_cols, blocks, sram_bytes, hardware,
                      rows=variant.group if variant.pack_gqa else 1)  # fmt: skip
    check_row(row, costs["n"] * (variant.group if variant.pack_gqa else 1))
    outputs = {"O": np.empty(q.shape, q.dtype)} | {name: _like(q, k, name) for name in entry.saves}
    programs = gqa.of_variant(variant, costs, {"Q": q}, {"K": k, "V": v}, outputs, {})
    costs |= each_program(
        costs, algorithm, record, row, programs,
        lambda chip, n, **o: entry.forward(chip, **_tiling(costs), dropout=_dropout(dropout_p, seed, n), **o),
        **variant.about(),
    )  # fmt: skip
    if costs["trace"] is not None and record == "values":  # the first program's O (a packed group's rows interleaved)
        first = (
            gqa.interleave(outputs["O"][0, : variant.group]) if variant.pack_gqa else outputs["O"][(0,) * (q.ndim - 2)]
        )
        costs["trace"].output = first.astype(np.float64).tolist()
    output = outputs.pop("O")
    return Result(
        **costs, **variant.options(), dropout_p=dropout_p, seed=seed, output=output, saved=outputs, q=q, k=k, v=v
    )


def count(
    algorithm: str, *, n: int, d: int, nk: int | None = None, batch: int = 1, heads: int = 1,
    kv_heads: int | None = None, dtype: str = "fp16", **options,
) -> Result:  # fmt: skip
    """The ledger of `run` for batch × heads query heads (kv_heads K/V heads: GQA), without their numerics.

    Every head moves the same tiles, so one head (one GQA group) is simulated on seeded random data and
    its ledger counted batch × heads (× kv_heads) times. `options` are `run`'s (not `record`, `row`, `seed`).
    """
    q, k, v = _one_group(n, nk, d, dtype, batch, heads, kv_heads, options)
    one = run(algorithm, q, k, v, **options)
    return _times(one, batch * (kv_heads or heads), output=None, saved={}, q=None, k=None, v=None)


def backward(algorithm, *arrays, **options) -> Gradients:
    """dQ, dK, dV of a forward pass, for an upstream gradient do. Two forms:

    `backward(result, do, **options)`: the Result of `sim.run` (or `sim.run_varlen`: do (total_q, Hq, d)),
    which kept its inputs, its output and what its forward left in HBM (its scale, mask and dropout seed).
    `backward(algorithm, q, k, v, o, lse_or_stats, do, **options)`: the arrays handed in.
    q, o, do are (N, d) and k, v (Nk, d) — or (B, H, ·, d) — in one storage dtype;
    `lse_or_stats` is what the forward left in HBM: the log-sum-exp L (…, N) (any
    algorithm), or flash1's {"ℓ", "m"} (`Result.stats`), or standard attention's {"P": P}
    (…, N, Nk); given L, standard attention's P is rebuilt as exp(τ q kᵀ − L) in float64,
    rounded to the storage dtype, and placed in HBM unbooked, as the forward would have left it.
    options: `block_rows`, `block_cols`, `blocks`, `sram_bytes`, `hardware`, `record`, `row` as for
    `run` (the backward picks its own blocks); in the second form also `causal`, `scale`,
    `dropout_p` and `seed` (the forward's, to redraw its dropout mask).
    """
    if isinstance(algorithm, Result):
        return _backward_of(algorithm, *arrays, **options)
    if len(arrays) != 6:
        raise InputError(
            f"backward: takes (algorithm, q, k, v, o, lse_or_stats, do) or (result, do); got {1 + len(arrays)} arguments"
        )
    return _backward(algorithm, *arrays, **options)


def _backward_of(result: Result, *do, hardware=None, sram_bytes: int | None = None, **options) -> Gradients:
    if len(do) != 1:
        raise InputError(f"backward: takes (result, do); got {1 + len(do)} arguments")
    if result.output is None:
        raise InputError(
            "result: a count result keeps no arrays to differentiate; "
            "use sim.count_backward for the backward's counts, or sim.run for a result with numerics"
        )
    if get(result.algorithm).backward is None:
        raise InputError(
            f"result: {result.algorithm} has no backward listing; the algorithms with one are {_with_backward()}"
        )
    for name in ("causal", "scale", "dropout_p", "seed", *VARIANTS):
        if name in options:
            raise InputError(f"{name}: a Result carries the forward's {', '.join(CARRIED)}; drop {name}")
    if hardware is None:  # the forward's part, and its SRAM unless another size is given
        hardware, sram_bytes = result.hardware, result.sram_bytes if sram_bytes is None else sram_bytes
    if isinstance(result, Packed):  # each sequence's backward on its own rows
        return varlen_backward.backward(result, do[0], _backward, hardware=hardware, sram_bytes=sram_bytes, **options)
    return _backward(
        result.algorithm, result.q, result.k, result.v, result.output, result.saved, do[0], causal=result.causal,
        scale=result.scale, dropout_p=result.dropout_p, seed=result.seed, hardware=hardware, sram_bytes=sram_bytes,
        **{name: getattr(result, name) for name in VARIANTS}, **options,
    )  # fmt: skip


def _backward(
    algorithm: str, q, k, v, o, lse_or_stats, do, *, causal: bool = False, scale: float | None = None,
    block_rows: int | None = None, block_cols: int | None = None, blocks: str = "fit", dropout_p: float = 0.0,
    seed: int | None = None, sram_bytes: int | None = None, hardware=None, record: str = "counts",
    row: int | None = None, window=None, alibi_slopes=None, softcap: float | None = None, pack_gqa: bool = False,
) -> Gradients:  # fmt: skip
    entry = get(algorithm)
    if entry.backward is None:
        raise InputError(f"algorithm: {algorithm} has no backward listing; the ones with one are {_with_backward()}")
    check_choice("record", record, RECORDS)
    dropout_p, seed = check_dropout(entry, dropout_p, seed, seed_needed=True)
    q, k, v = check_inputs(q, k, v)
    o, do = check_like_q(q, o=o, do=do)
    variant = check_variant(algorithm, q, k, window, alibi_slopes, softcap, pack_gqa, dropout_p)
    g = variant.group
    costs = configure(algorithm, True, q, k, scale, causal, block_rows, block_cols, blocks, sram_bytes, hardware,
                      rows=g if variant.pack_gqa else 1, softcap=variant.softcap is not None)  # fmt: skip
    k_each = np.repeat(k, g, axis=-3) if g > 1 else k  # P is rebuilt per query head
    saved = check_saved(algorithm, entry.saves, lse_or_stats, q, k_each, costs["scale"], causal)
    check_row(row, costs["n"] * (g if variant.pack_gqa else 1))
    summed = g > 1 and not variant.pack_gqa  # per head: dK_h, dV_h of each query head, then summed over the group
    dkv = {name: np.empty(k_each.shape if summed else k.shape, q.dtype) for name in ("dK", "dV")}
    dq = {"dQ": np.empty(q.shape, q.dtype)}
    programs = gqa.of_variant(variant, costs, {"Q": q, "O": o, "dO": do, **saved}, {"K": k, "V": v}, dq, dkv)
    costs |= each_program(
        costs, f"{algorithm} backward", record, row, programs,
        lambda chip, n, **o: entry.backward(chip, **_tiling(costs), dropout=_dropout(dropout_p, seed, n), **o),
        **variant.about(),
    )  # fmt: skip
    if summed:
        dkv = gqa.group_sum(costs, dkv, k, g)
    return Gradients(
        **costs, **variant.options(), dropout_p=dropout_p, seed=seed, dq=dq["dQ"], dk=dkv["dK"], dv=dkv["dV"]
    )


def count_backward(
    algorithm: str, *, n: int, d: int, nk: int | None = None, batch: int = 1, heads: int = 1,
    kv_heads: int | None = None, dtype: str = "fp16", **options,
) -> Gradients:  # fmt: skip
    """The ledger of `backward` for batch × heads heads, without their numerics (one head or GQA group simulated).

    `options` are `count`'s: `causal`, `scale`, blocks, SRAM and hardware, `dropout_p`, the variants.
    """
    q, k, v = _one_group(n, nk, d, dtype, batch, heads, kv_heads, options)
    do = np.ones_like(q)
    keys = ("causal", "scale", "window", "alibi_slopes", "softcap")
    o, lse = reference_variants.attention(q, k, v, **{key: options[key] for key in keys if key in options})
    seed = 0 if options.get("dropout_p") else None
    one = _backward(algorithm, q, k, v, o.astype(q.dtype), lse, do, seed=seed, **options)
    return _times(one, batch * (kv_heads or heads), dq=None, dk=None, dv=None)


def decode(
    q, k, v, *, splits: int | None = None, causal: bool = False, scale: float | None = None,
    block_cols: int | None = None, sram_bytes: int | None = None, hardware=None, record: str = "counts",
    block_table=None, cache_seqlens=None, window=None, alibi_slopes=None, softcap: float | None = None,
) -> Decoded:  # fmt: skip
    """Flash-Decoding of a few query rows q (Nq, d) against a long k, v (Nk, d) — or (B, H, ·, d).

    The keys are split into `splits` chunks (None: the number the SM model of `sim.machine.occupancy`
    finds fastest for this batch × heads on `hardware`); each chunk's partial output and
    log-sum-exp are then combined. Causal masks align bottom-right. GQA: k, v (B, Hkv, Nk, d),
    each K/V head's g query heads packed into one Q of g·Nq rows, so K/V are read once per split.
    A paged cache: k, v are k_cache, v_cache (num_pages, page_size, Hkv, d), with `block_table`
    (B, pages per sequence) and `cache_seqlens` (B,) (`sim.api.paged`). `window`, `alibi_slopes`,
    `softcap` as for `run`.
    """
    if block_table is not None or cache_seqlens is not None:
        if block_cols is not None:
            raise InputError("block_cols: on a paged cache each K/V tile is one page; drop block_cols")
        return paged.decode(
            q, k, v, block_table, cache_seqlens, splits=splits, causal=causal, scale=scale, sram_bytes=sram_bytes,
            hardware=hardware, record=record, window=window, alibi_slopes=alibi_slopes, softcap=softcap,
        )  # fmt: skip
    check_choice("record", record, RECORDS)
    q, k, v = check_inputs(q, k, v)
    g = q.shape[1] // k.shape[1] if q.ndim == 4 else 1
    variant = check_variant("flash2", q, k, window, alibi_slopes, softcap, g > 1)
    *lead, Nq, d = q.shape
    Nk, s, heads = k.shape[-2], q.dtype.itemsize, int(np.prod(lead, dtype=np.int64))
    scale = check_scale(scale, d)
    hw, M = check_hardware(hardware, sram_bytes)
    if splits is None:
        splits = best_splits(heads // g, 1, g * Nq, Nk, d, s, hw)
    elif check_positive("splits", splits) > Nk:
        raise InputError(f"splits: {splits} chunks of the {Nk} keys would leave some empty; choose 1 … {Nk}")
    Bc = decoding_blocks(
        g * Nq, Nk, d, s, M, splits, None if block_cols is None else check_positive("block_cols", block_cols)
    )
    costs = dict(
        algorithm="decode", block_rows=g * Nq, block_cols=Bc, sram_bytes=M, scale=scale, causal=causal,
        dtype=dtype_name(q.dtype), hardware=hw, heads=heads, n=Nq, nk=Nk, d=d,
    )  # fmt: skip
    outputs = {"O": np.empty(q.shape, q.dtype), "L": np.empty((*lead, Nq), np.float32)}
    programs = gqa.of_variant(variant, costs, {"Q": q}, {"K": k, "V": v}, outputs, {})
    costs |= each_program(
        costs, "decode", record, None, programs,
        lambda chip, n, **o: flash_decoding.forward(chip, Bc=Bc, splits=splits, scale=scale, causal=causal, **o),
        splits=splits,
    )  # fmt: skip
    occ = occupancy(heads // g, 1, splits, g * Nq, Nk, d, s, hw, Bc)
    return Decoded(**costs, **variant.options(), output=outputs["O"], lse=outputs["L"], splits=splits, occupancy=occ)


def _one_group(n, nk, d, dtype, batch, heads, kv_heads, options: dict):
    """q (1, g, n, d), k, v (1, 1, nk, d) of seeded random data: one GQA group (one head without kv_heads); a
    group's share of `alibi_slopes` in `options`."""
    q, k, v = (x[0, 0] for x in random_head(n, nk, d, dtype, batch, heads))
    if kv_heads is None:
        return q, k, v
    if check_positive("kv_heads", kv_heads) > heads or heads % kv_heads:
        raise InputError(
            f"kv_heads: {heads} query heads are not a multiple of {kv_heads} K/V heads; GQA needs Hq = g·Hkv"
        )
    g = heads // kv_heads
    if options.get("alibi_slopes") is not None:
        options["alibi_slopes"] = np.resize(np.asarray(options["alibi_slopes"], dtype=np.float64), g)
    return np.broadcast_to(q, (1, g, *q.shape)), k[None, None], v[None, None]


def _tiling(costs: dict) -> dict:
    """The keyword arguments every listing takes: Br, Bc, scale, causal."""
    return dict(Br=costs["block_rows"], Bc=costs["block_cols"], scale=costs["scale"], causal=costs["causal"])


def _dropout(p: float, seed: int | None, head: int) -> Dropout | None:
    return Dropout(p, seed, head) if p > 0 else None


def _with_backward() -> str:
    return ", ".join(name for name, a in REGISTRY.items() if a.backward is not None)


def _like(q: np.ndarray, k: np.ndarray, name: str) -> np.ndarray:
    """An empty array for what a forward leaves in HBM: P (…, N, Nk) in the storage dtype, or a statistic (…, N)."""
    if name == "P":
        return np.empty((*q.shape[:-1], k.shape[-2]), q.dtype)
    return np.empty(q.shape[:-1], np.float32)


def _times(one, heads: int, **cleared):
    """A one-head (one-group) result counted `heads` times, its arrays cleared."""
    ledger = Ledger()
    ledger.add(one.ledger, heads)
    return replace(one, ledger=ledger, heads=one.heads * heads, **cleared)
