"""`flash_attention_backward`: dQ, dK, dV from the saved log-sum-exp (rungs 4, 5 and 7 of gpu/registry.py), in three
launches (two where rung 7 rounds dQ itself); rungs 5 and 7 also take the forward's variants (gpu/variants.py: GQA,
window, ALiBi, softcap, packed batches).

The pre-pass computes D = rowsum(dO ∘ O) and zeroes a float32 dQ accumulator; the main kernel (one thread block
per K/V block) recomputes P from L tile by tile and adds τ dS K into dQ (atomics; rung 7: TMA reduce-adds, in a
fixed order with `deterministic`); the last pass rounds dQ to the storage dtype. Rung 7's plain builds with TMA
reduce-adds round dQ themselves instead where there are FUSED_PLANES query planes or more (`fused`): the last thread
block of a plane to finish (a counter per plane, zeroed by the pre-pass) rounds the plane's dQ, and no third launch
runs. Extra device memory: D (N floats) and the accumulator (N·d floats) per head, rung 7's L and D blocks (2N
floats) and counter (1 int), deterministic's counters (N / Br ints): O(N). A call is checked and planned once per
key as flash_attention's (its host work ~70–100 µs a call on an H100 host against ~180–260 before: run 41-host13).
"""

import dataclasses
import functools
import math

import numpy as np

from gpu import captured, device, flash, inputs, layout, registry, source, tma, variants
from sim.core.errors import InputError

PREPASS_WARPS = 8  # warps per thread block of the pre-pass (32 / ROW_LANES rows each)
DQ_THREADS = 256
NULL = np.uint64(0)  # a null pointer argument
PLAIN = variants.Variant()
# rung 7 rounds dQ in its main kernel from this many query planes (batch · heads) on. The plane's last thread block
# rounds it at one SM's rate (~30 GB/s) where the pass runs at the chip's (~2.9 TB/s): the grid's last plane is its
# exposed tail, which pays only where the pass over all planes costs more. H100, 16k tokens (gpu/NOTES.md run
# 39-bwd5): ×1.015–1.050 at 256 and 512 planes, ×0.997–1.006 at 64 and 128 (within the timing's noise),
# ×0.966–1.013 at 16 and 32 (causal ×0.966, 0.969: its last block, K/V block 0, walks every Q block)
FUSED_PLANES = 256


def flash_attention_backward(
    q, k, v, o, lse, do, *, causal=False, scale=None, window=None, alibi_slopes=None, softcap=None,
    cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, kernel=None, tiles=None,
    poison=False, check_finite=False, deterministic=False,
):  # fmt: skip
    """(dq, dk, dv), shaped and typed like (q, k, v), for the forward output o, its lse and the upstream gradient do.

    o and lse are what `flash_attention(q, k, v, causal=…, scale=…, return_lse=True)` returned; pass the same
    causal and scale. `kernel`: the rung, 4 (readable, also float32), 5 (tensor cores, fp16/bf16) or 7 (wgmma and TMA: sm_90, d = 64 or 128); None: the default for d on this GPU.
    `tiles`, `poison` and `check_finite` are as for `flash_attention` (the check covers o and do too).
    `deterministic`: dQ bit for bit the same on every run (rung 7 only: its K/V blocks add into each dQ_i in order).
    The variants are the forward's (`flash_attention`), passed again with the same values: k, v with fewer heads
    (dk, dv come back with those heads, each the sum over its g query heads), `window`, `alibi_slopes`, `softcap`,
    and a packed batch (q, o, do (total_q, Hq, d), lse (total_q, Hq) as the forward returned it; NumPy
    `cu_seqlens_q/k` let a call be checked once per set of lengths, as the forward's). Rung 5 takes them all;
    the default is rung 7 where it runs and takes the call's (registry.backward).
    """
    cupy, tiles = device.require(), tiles or None  # tiles: as the kernel's default where falsy
    key = None  # a call without variants but GQA and host lengths, checked once per key (inputs.signature, …)
    packed = variants.packed_key(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    keyed = all(x is None for x in (window, alibi_slopes, softcap)) and packed is not None
    if keyed and not check_finite and type(deterministic) is bool:
        options, arrays = inputs.plain_options(causal, scale, kernel, tiles), inputs.signature(q, k, v, o, lse, do)
        key = options and arrays and (arrays, options, packed, deterministic, cupy.cuda.runtime.getDevice(), resolve)
    call = _calls.get(key) if key else None
    if call is None:
        call = inputs.Call(*_checked(q, k, v, o, lse, do, causal, scale, window, alibi_slopes, softcap, cu_seqlens_q,
                                     cu_seqlens_k, max_seqlen_q, max_seqlen_k, kernel, tiles, check_finite,
                                     deterministic))  # fmt: skip
        if key:
            inputs.remember(_calls, key, call)
    p, variant = call.p, call.variant
    rows = tuple(q.shape[:2]) if variant.packed else (p.batch, p.heads, p.n)  # D's shape: one float per row of o
    vkey = flash.variant_key(variant)
    with q.device:
        plan = call.plan(FUSED_PLANES, make_plan, call.spec, p, tiles, deterministic, vkey, rows, FUSED_PLANES)
        q, k, v, o, do = (layout.rows_of(x, plan.row) for x in (q, k, v, o, do))
        lse = cupy.ascontiguousarray(lse.T) if variant.packed else lse  # packed: stored (Hq, total_q), the forward's
        lse = lse if lse.data.ptr % 16 == 0 else lse.copy()
        work = tuple((cupy.zeros if zeroed else cupy.empty)(shape, dtype=dtype) for shape, dtype, zeroed in plan.work)
        dq, dk, dv = cupy.empty_like(q), cupy.empty_like(k), cupy.empty_like(v)
        if poison:
            layout.poison(dq, dk, dv)
        launch_plan(plan, p, (q, k, v, o, lse, do), work, (dq, dk, dv), variant)
        if captured.capturing(cupy, cupy.cuda.get_current_stream().ptr):  # a graph's: what it allocated, held
            captured.hold(q, k, v, o, lse, do, work, dq, dk, dv, variant)
    return tuple(layout.trimmed(x, p.d) for x in (dq, dk, dv))


_calls: dict = {}  # key (signatures, options, deterministic, current device, resolve) → inputs.Call


def _checked(q, k, v, o, lse, do, causal, scale, window, alibi_slopes, softcap, cu_seqlens_q, cu_seqlens_k,
             max_seqlen_q, max_seqlen_k, kernel, tiles, check_finite, deterministic) -> tuple:  # fmt: skip
    """Every check of a call's arguments (one-line InputErrors): (Problem, Variant, the kernel that runs it)."""
    spec = registry.backward(kernel)
    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        p, kv_heads, cu = variants.check_packed(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal, scale=scale,
            dtypes_allowed=spec.dtypes,
        )  # fmt: skip
        check_packed_backward(q, o, lse, do)
        if check_finite:
            inputs.check_finite(p.dtype, q=q, k=k, v=v, o=o, do=do)
    else:
        if max_seqlen_q is not None or max_seqlen_k is not None:
            raise InputError("max_seqlen_q, max_seqlen_k: only for a packed batch (with cu_seqlens_q and cu_seqlens_k)")
        p = inputs.check(
            q, k, v, causal=causal, scale=scale, dtypes_allowed=spec.dtypes, finite=check_finite, gqa=True
        )  # fmt: skip
        inputs.check_backward(p, q, o, lse, do, finite=check_finite)
        kv_heads, cu = k.shape[1], None
    variant = variants.check(p, kv_heads, window=window, alibi_slopes=alibi_slopes, softcap=softcap, packed=cu)
    spec = resolve(kernel, p.d, variant)
    check_deterministic(spec, spec.tiles(p.d, tiles), deterministic, variant)
    return p, PLAIN if variant.plain else variant, spec


def check_packed_backward(q, o, lse, do) -> None:
    """A packed batch's o and do (shaped and typed like q, C-contiguous, on q's device) and lse (float32,
    (total_q, Hq): what flash_attention returned)."""
    cupy = device.require()
    for arg, x in (("o", o), ("do", do)):
        if not isinstance(x, cupy.ndarray) or x.shape != q.shape or x.dtype != q.dtype:
            raise InputError(f"{arg}: expected a CuPy array shaped {tuple(q.shape)}, {q.dtype}, like q")
        if not x.flags.c_contiguous or x.device != q.device:
            raise InputError(f"{arg}: must be C-contiguous and on q's device")
    if not isinstance(lse, cupy.ndarray) or lse.dtype != cupy.float32 or lse.shape != q.shape[:2]:
        raise InputError(
            f"lse: expected float32 shaped {tuple(q.shape[:2])} (total_q, Hq), as flash_attention returned it"
        )
    if lse.device != q.device:
        raise InputError("lse: must be on q's device")


def resolve(kernel, d: int, variant: variants.Variant = PLAIN) -> registry.KernelSpec:
    """The backward kernel for head dim d on this GPU: `kernel` if it runs here and takes the call's variant (else
    InputError saying why), or the default for d and the variant on this GPU (registry.backward; without a GPU, rung 5).
    A rung given by its number, or None, is looked up once per head dim, variant kinds and device."""
    cc = device.capability() if device.available()[0] else None
    kinds = variant.kinds if variant is not PLAIN else ()
    if kernel is None or type(kernel) is int:
        return _resolve(kernel, d, cc, kinds)
    return _resolve.__wrapped__(kernel, d, cc, kinds)


@functools.lru_cache(maxsize=64)
def _resolve(kernel, d: int, cc: str | None, kinds: tuple[str, ...]) -> registry.KernelSpec:
    spec = registry.backward(kernel, d, cc, kinds)
    missing = [kind for kind in kinds if kind not in spec.variants]
    if missing:
        raise InputError(f"kernel: {spec.name} does not take {', '.join(missing)} (rung 5 takes every variant)")
    why = cc and spec.fits(d, cc)
    if why:
        raise InputError(f"kernel: {why}")
    return spec


def check_deterministic(spec: registry.KernelSpec, tiles, deterministic, variant: variants.Variant = PLAIN) -> None:
    """InputError unless `deterministic` is a bool that this kernel, tiling and variant can honour."""
    if not isinstance(deterministic, bool):
        raise InputError(f"deterministic: expected True or False, got {deterministic!r}")
    if deterministic and not spec.tma:
        raise InputError(
            f"deterministic: only rung 7 (sm_90, d = 64 or 128) orders its dQ additions; {spec.name} adds them with atomics in any order"
        )
    if deterministic and tiles.dq_atomics:
        raise InputError("deterministic: needs rung 7's TMA reduce-adds, not tiles with dq_atomics")
    if deterministic and variant.window is not None:
        raise InputError("deterministic: not with a window (rung 7's turns assume every K/V block before j sees Q_i)")


def fused(spec: registry.KernelSpec, tiles, planes: int, variant: variants.Variant = PLAIN) -> bool:
    """Whether the main kernel rounds dQ itself (rung 7, plain, TMA reduce-adds, at least FUSED_PLANES query planes),
    with no third launch; `tiles.dq_pass` keeps the third launch."""
    return bool(spec.tma and not tiles.dq_atomics and not tiles.dq_pass and variant.plain and planes >= FUSED_PLANES)


def workspace(spec: registry.KernelSpec, p, row: int, tiles, deterministic: bool = False, rows=None) -> list[tuple]:
    """(shape, dtype, zeroed) of each float32 / int32 work array the launches need, in `launch`'s order: D, the dQ
    accumulator, then for rung 7 its L and D blocks of Br rows, the counter of thread blocks done with each query
    plane (`fused`; zeroed by the pre-pass) and (deterministic) the per-Q-block counters of its order.
    `rows`: the shape of D, one float per row of o ((batch, heads, N); a packed batch's (total_q, Hq))."""
    heads = (p.batch, p.heads)
    rows = tuple(rows) if rows is not None else (*heads, p.n)
    work = [(rows, "float32", False), ((*rows, row), "float32", False)]
    if spec.tma:
        blocks = -(-p.n // tiles.block_rows)
        work.append(((*heads, blocks, 2, tiles.block_rows), "float32", False))
        work.append((heads, "int32", False))
        if deterministic:
            work.append(((*heads, blocks), "int32", True))
    return work


@dataclasses.dataclass(frozen=True)
class Plan:
    """The launches of one backward call worked out from what does not change between calls of one shape: the row
    length in device memory, the work arrays (`workspace`), the pre-pass, the main kernel (rung 7: its tensor maps,
    Q_i and dO_i in boxes of Br rows, K_j and V_j of Bc, dQ_i reduced in boxes of 64) and the dQ pass (None where
    the main kernel rounds dQ itself)."""

    row: int
    work: tuple
    prepass: source.Launch
    main: source.Launch
    maps: tma.Maps | None
    dq: source.Launch | None


@functools.lru_cache(maxsize=256)
def make_plan(spec, p, tiles, deterministic: bool, variant: tuple, rows: tuple, fused_planes: int) -> Plan:
    """The Plan of a call (Problem p, `tiles` as given or None for the kernel's default, `deterministic`,
    flash.variant_key, D's shape `rows`) while FUSED_PLANES is `fused_planes` (tests lower it)."""
    variant = flash.variant_of(variant)
    tiles, row = spec.tiles(p.d, tiles), spec.row(p.d)
    work = tuple(workspace(spec, p, row, tiles, deterministic, rows))
    pre = dataclasses.replace(p, batch=1, heads=1, n=math.prod(rows)) if variant.packed else p  # D's rows, o's order
    prepass_launch = _prepass(pre, row, work[2][0] if spec.tma else None, variant.packed)
    defines = spec.defines(p.d, p.dtype, tiles) | variant.defines()
    rounds = fused(spec, tiles, p.batch * p.heads, variant)
    maps = None
    if spec.tma:
        defines |= {"DETERMINISTIC": int(deterministic), "FUSED_DQ": int(rounds)}
        br, bc = tiles.block_rows, tiles.block_cols
        rows_map, acc_map = (tma.packed_map,) * 2 if variant.packed else (tma.rows_map, tma.accumulator_map)
        maps = tma.Maps(*((rows_map, rows) for rows in (br, bc, bc, br)), (acc_map, 64))  # packed: (H, total, d) views
    tc, kv_heads = -(-p.nk // tiles.block_cols), p.heads // variant.group
    grid = (tc, kv_heads, p.batch) if variant.packed else (tc, p.batch * kv_heads, 1)
    scalars = (np.int32(p.n), np.int32(p.nk), np.float32(p.scale), np.int32(p.causal))
    main = source.launch(spec, defines, spec.smem(p.d, tiles), grid, (tiles.threads, 1, 1), scalars)
    dq = None if rounds else _round_dq(p.dtype, row, math.prod(rows) * row)
    return Plan(row, work, prepass_launch, main, maps, dq)


def launch(
    spec: registry.KernelSpec, p, tiles, row: int, ins: tuple, work: tuple, outs: tuple, variant=PLAIN
) -> None:  # fmt: skip
    """The three launches (two when `fused`) on prepared arrays: ins = (q, k, v, o, lse, do) with rows of `row`
    elements, work as `workspace` lists it (deterministic when it holds the counters), outs = (dq, dk, dv), all
    allocated by the caller (the autograd path allocates them in PyTorch). A variant adds its #defines and arguments,
    and one thread block per K/V block of each K/V head: grid (Tc, B·Hkv), packed (Tc of the longest, Hkv, B). The
    launches are planned once per shape (`make_plan`); a call makes or finds its tensor maps and launches."""
    deterministic = bool(spec.tma) and len(work) == 5
    plan = make_plan(spec, p, tiles, deterministic, flash.variant_key(variant), tuple(work[0].shape), FUSED_PLANES)
    assert plan.row == row
    launch_plan(plan, p, ins, work, outs, variant)


def launch_plan(plan: Plan, p, ins: tuple, work: tuple, outs: tuple, variant) -> None:
    q, k, v, o, lse, do = ins
    D, dq_acc, *blocks = work
    dq, dk, dv = outs
    cu_q = variant.cu_seqlens_q if blocks and variant.packed else NULL  # rung 7's packed L_i, D_i blocks
    plan.prepass((o, do, D, dq_acc, lse, *(blocks[:2] or (NULL, NULL)), cu_q))
    if plan.maps:  # rung 7
        counts = blocks[2] if len(blocks) == 3 else NULL  # deterministic's
        plan.main((*plan.maps(q, k, v, do, dq_acc), blocks[0], dq_acc, counts, blocks[1], dq, dk, dv), variant.args(p))
    else:
        plan.main((q, k, v, do, lse, D, dq_acc, dk, dv), variant.args(p))
    if plan.dq:
        plan.dq((dq_acc, dq))


def forget() -> None:
    """Forget every call and plan remembered here: for a tool that swaps `resolve` or gpu.source.function between
    builds (gpu.lab.backward_builds), whose next calls are then planned anew."""
    _calls.clear()
    for cache in (make_plan, _prepass, _round_dq):
        cache.cache_clear()


def prepass(p, row: int, o, do, lse, D, dq_acc, blocks=None, arrivals=None) -> None:
    """FlashAttention-2's Algorithm 2, lines 3–4: D = rowsum(dO ∘ O), dQ = 0 (the float32 accumulator); `blocks`
    (rung 7's (batch, heads, Tr, 2, Br)): L_i·log2 e, D_i per Q block, zeros past N; `arrivals` (counters) zeroed."""
    pre = _prepass(p, row, None if blocks is None else tuple(blocks.shape))
    pre((o, do, D, dq_acc, lse, NULL if blocks is None else blocks, NULL if arrivals is None else arrivals, NULL))


@functools.lru_cache(maxsize=256)
def _prepass(p, row: int, blocks: tuple | None, packed: bool = False) -> source.Launch:
    """The pre-pass of p's rows (packed: one head of total_q · Hq) and rung 7's `blocks` (packed: by sequence)."""
    spec = registry.HELPERS["bwd_prepass"]
    heads = p.batch * p.heads
    padded = p.n if blocks is None or packed else blocks[2] * blocks[4]
    defines = spec.defines(row, p.dtype, None)
    batch, hq, tr, _, block_rows = blocks if blocks is not None else (1, 1, 1, 2, 1)
    threads = 32 * PREPASS_WARPS
    grid = (-(-heads * padded * defines["ROW_LANES"] // threads), 1, 1)
    scalars = tuple(map(np.int32, (heads, p.n, padded, block_rows, batch, hq, tr)))
    return source.launch(spec, defines, 0, grid, (threads, 1, 1), scalars)


def round_dq(p, row: int, dq_acc, dq) -> None:
    """dQ = the float32 accumulator, rounded once to the storage dtype."""
    _round_dq(p.dtype, row, dq.size)((dq_acc, dq))


@functools.lru_cache(maxsize=256)
def _round_dq(dtype: str, row: int, n: int) -> source.Launch:
    spec = registry.HELPERS["bwd_dq"]
    defines = spec.defines(row, dtype, None)
    per_thread = 4 if defines["WIDE"] else 1  # elements per thread and step
    blocks = min(-(-n // (per_thread * DQ_THREADS)), 65535)
    return source.launch(spec, defines, 0, (blocks, 1, 1), (DQ_THREADS, 1, 1), (np.int64(n),))
