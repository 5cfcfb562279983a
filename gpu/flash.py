"""`flash_attention`: the FlashAttention-2 forward kernels (rungs 1–3 and 6 of gpu/registry.py) behind one call, and
the variants rungs 3 and 6 take (gpu/variants.py)."""

import dataclasses
import functools
import math

import numpy as np

from gpu import captured, device, inputs, layout, registry, source, tma, variants
from sim.core.errors import InputError
from sim.machine.grids import causal_walk

PLAIN = variants.Variant()


def flash_attention(
    q, k, v, *, causal=False, scale=None, window=None, alibi_slopes=None, softcap=None, cu_seqlens_q=None,
    cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False, kernel=None, tiles=None, poison=False,
    check_finite=False,
):  # fmt: skip
    """Attention of q (batch, heads, N, d) against k, v (batch, heads, Nk, d): o like q, or (o, lse) with return_lse.

    lse (float32, (batch, heads, N)) is the natural log-sum-exp of each row of scaled logits, what the backward
    pass needs (−∞ for a row that sees no key, whose o is zeros). The default call does no pass over the inputs
    beyond the kernel's and no host synchronization: NaN in the inputs flows through as it does through attention.
    `kernel`: the rung, 1 (readable, also float32), 2 or 3 (tensor cores, fp16/bf16), 6 (wgmma and TMA: sm_90,
    d = 64 or 128); None picks rung 6 where it runs, else rung 3. The old names "v1" … "v4" still work, with a warning.
    `tiles` overrides the kernel's tiling (gpu.tiling.Tiles); `poison` fills the outputs with NaN before the
    launch, so that an element the kernel fails to write shows up (the tests use it); `check_finite` refuses
    NaN/Inf inputs, for debugging, at the cost of a pass over q, k, v and a synchronization.
    The variants (rungs 3 and 6; gpu/variants.py, the simulator's conventions): k, v with fewer heads (GQA),
    `window` (left, right), `alibi_slopes` (Hq,) or (B, Hq), `softcap` c; a packed batch with `cu_seqlens_q`,
    `cu_seqlens_k` (B + 1) and q (total_q, Hq, d), k, v (total_k, Hkv, d), o like q and lse (total_q, Hq) as the
    simulator's (a transposed view: stored (Hq, total_q), FlashAttention's layout).
    Host work: a call without variants (GQA aside, and a packed batch whose `cu_seqlens_q/k` are NumPy arrays:
    CuPy ones are read back, a copy and a synchronization, every call) is checked once per key, its arrays'
    shapes, strides, dtypes and devices with the options, the lengths and the current device (inputs.signature),
    and planned once per key and stream (`Plan`); a later call of that key reads its arrays' addresses (alignment,
    tensor maps), allocates the outputs and launches: ~25–45 µs a call on an H100 host against ~105–130 before
    (gpu/NOTES.md run 41-host13).
    """
    cupy, tiles = device.require(), tiles or None  # tiles: as the kernel's default where falsy
    inputs.check_flag("return_lse", return_lse)
    key = None  # a call without variants but GQA and host lengths, checked once per key (inputs.signature, …)
    if not check_finite and all(x is None for x in (window, alibi_slopes, softcap)):
        options, arrays = inputs.plain_options(causal, scale, kernel, tiles), inputs.signature(q, k, v)
        packed = variants.packed_key(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        found = options and arrays and packed is not None
        key = found and (arrays, options, packed, cupy.cuda.runtime.getDevice(), resolve)
    call = _calls.get(key) if key else None
    if call is None:
        call = inputs.Call(*_checked(q, k, v, causal, scale, window, alibi_slopes, softcap, cu_seqlens_q, cu_seqlens_k,
                              max_seqlen_q, max_seqlen_k, kernel, check_finite))  # fmt: skip
        if key:
            inputs.remember(_calls, key, call)
    p, variant = call.p, call.variant
    device_id = q.device.id
    stream = cupy.cuda.get_current_stream(device_id).ptr
    capture = captured.capturing(cupy, stream)  # a graph's: a plan of its own, its arrays held (gpu.captured)
    with q.device:
        args, make = (call.spec, p, tiles, variant_key(variant), device_id, stream), make_plan.__wrapped__
        plan = call.plan(stream, make_plan, *args) if not capture else captured.plan(cupy, stream, make, *args)
        q, k, v = (layout.rows_of(x, plan.row) for x in (q, k, v))
        o = cupy.empty((*q.shape[:-1], plan.row), dtype=q.dtype)
        lse = cupy.empty(
            q.shape[-2::-1] if variant.packed else q.shape[:-1], dtype=cupy.float32
        )  # packed: (Hq, total_q)
        if poison:
            layout.poison(o, lse)
        launch_plan(plan, p, q, k, v, o, lse, variant)
        if capture:
            captured.hold(q, k, v, o, lse, variant)  # padded copies, a dropped lse, the slopes and lengths
    o, lse = layout.trimmed(o, p.d), lse.T if variant.packed else lse
    return (o, lse) if return_lse else o


def _checked(q, k, v, causal, scale, window, alibi_slopes, softcap, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
             max_seqlen_k, kernel, check_finite) -> tuple:  # fmt: skip
    """Every check of a call's arguments (one-line InputErrors): (Problem, Variant, the kernel that runs it)."""
    spec = registry.forward(kernel)
    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        p, kv_heads, packed = variants.check_packed(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal, scale=scale,
            dtypes_allowed=spec.dtypes,
        )  # fmt: skip
        if check_finite:
            inputs.check_finite(p.dtype, q=q, k=k, v=v)
    else:
        if max_seqlen_q is not None or max_seqlen_k is not None:
            raise InputError("max_seqlen_q, max_seqlen_k: only for a packed batch (with cu_seqlens_q and cu_seqlens_k)")
        p = inputs.check(q, k, v, causal=causal, scale=scale, dtypes_allowed=spec.dtypes, finite=check_finite, gqa=True)
        kv_heads, packed = k.shape[1], None
    variant = variants.check(p, kv_heads, window=window, alibi_slopes=alibi_slopes, softcap=softcap, packed=packed)
    spec = resolve(kernel, p.d)
    if not variant.plain and not spec.variants:
        raise InputError(
            f"kernel: {spec.name} takes no variant (GQA, window, ALiBi, softcap, packed); rungs 3 and 6 do"
        )
    return p, PLAIN if variant.plain else variant, spec


_calls: dict = {}  # key (signatures, options, current device, resolve) → inputs.Call


def resolve(kernel: str | None, d: int) -> registry.KernelSpec:
    """The forward kernel for head dim d on this GPU: `kernel` if it runs here (else InputError saying why), or the
    default (without a GPU: the default anywhere, rung 3). A rung given by its number, or None, is looked up once per
    head dim and device (a refusal raises each time; an old name warns each time)."""
    cc = device.capability() if device.available()[0] else None
    if kernel is None or type(kernel) is int:
        return _resolve(kernel, d, cc)
    return _resolve.__wrapped__(kernel, d, cc)


@functools.lru_cache(maxsize=64)
def _resolve(kernel, d: int, cc: str | None) -> registry.KernelSpec:
    spec = registry.forward(kernel, d, cc)
    why = cc and spec.fits(d, cc)
    if why:
        raise InputError(f"kernel: {why}")
    return spec


def variant_key(variant: variants.Variant) -> tuple:
    """What of a call's variant a launch's plan depends on (its device arrays, the slopes and cumulative lengths, go
    to the kernel per call): GQA's group, the window, softcap, whether ALiBi and packed, a packed batch's lengths."""
    if variant is PLAIN:
        return ()
    return (variant.group, variant.window, variant.softcap, variant.slopes is not None, variant.seqlens, variant.packed)


def variant_of(key: tuple) -> variants.Variant:
    """A Variant with the #defines and kinds of the one `variant_key` came from (True stands for a device array)."""
    if not key:
        return PLAIN
    group, window, softcap, alibi, seqlens, packed = key
    return variants.Variant(group, window, True if alibi else None, softcap, True if packed else None, None, seqlens)


@dataclasses.dataclass(frozen=True)
class Plan:
    """One forward launch worked out from what does not change between calls of one shape: the row length in
    device memory, the launch (build, grid, threads; after lse the arguments N, Nk, τ, causal and rung 6's planes,
    converted once), rung 6's tensor maps (Q_i in boxes of Br rows, K_j and V_j of Bc; O_i's of 64 rows where it
    leaves by TMA, `o_map`), whether the variant's arguments follow (not for a plain call or GQA alone), and the
    persistent walk's arguments: the host's list where it has one, its length or (ticketed, geometry.tickets) the
    number of units, and the tickets (`_tickets`)."""

    row: int
    launch: source.Launch
    maps: tma.Maps | None
    o_map: bool
    variant_args: bool
    walk: tuple


@functools.lru_cache(maxsize=256)
def make_plan(spec: registry.KernelSpec, p, tiles, variant: tuple, device_id: int, stream: int) -> Plan:
    """The Plan of a call (Problem p, `tiles` as given or None for the call's default, `variant_key`), on device
    `device_id` and stream `stream` (the walk is copied per stream: `_device_walk`; the tickets are the plan's own:
    one pair per shape and stream)."""
    variant = variant_of(variant)
    tiles = spec.tiles_for(p.d, p.n, p.causal, tiles)
    if tiles.persistent and (variant.softcap is not None or variant.slopes is not None):
        tiles = dataclasses.replace(tiles, persistent=False)
    gqa_alone = spec.tma and variant.kinds == ("gqa",)
    smem = spec.smem(p.d, tiles)
    defines = spec.defines(p.d, p.dtype, tiles) | ({"GROUP": variant.group} if gqa_alone else variant.defines())
    if variant.packed and defines.get("O_TMA"):
        defines["O_TMA"] = 0
    tr = -(-p.n // tiles.block_rows)
    planes = p.batch * p.heads
    if defines.get("WALK") and not (tiles.persistent and p.causal and (variant.plain or gqa_alone)):
        defines["WALK"] = 0
    walk, ticketed = None, bool(defines.get("TICKETS"))
    if tiles.persistent and (variant.packed or defines.get("WALK")):  # the host's list, one copy a stream
        br, bc = tiles.block_rows, tiles.block_cols
        if variant.packed:
            walk = _device_units(variant.seqlens, p.heads, br, bc, p.causal, ticketed, device_id, stream)
        else:
            walk = _device_walk(planes, p.n, p.nk, br, bc, ticketed, device_id, stream)
    if tiles.persistent:  # the kernel's units: a tile, or causal a pair of tiles of one plane
        units = len(walk) if walk is not None else planes * (-(-tr // 2) if p.causal else tr)
        grid = (min(units, _sm_count(device_id)), 1, 1)
    else:
        grid = (tr, p.heads, p.batch) if variant.packed else (tr, planes, 1)
    scale = p.scale * math.log2(math.e) if spec.scale_log2 else p.scale
    scalars = (np.int32(p.n), np.int32(p.nk), np.float32(scale), np.int32(p.causal))
    if spec.tma:
        scalars += (np.int32(planes),)
    launch = source.launch(spec, defines, smem, grid, (tiles.threads, 1, 1), scalars)
    o_map, maps = bool(defines.get("O_TMA")), None
    if spec.tma:  # a packed batch's maps see (Hq, total, d); O_i leaves by TMA only unpacked
        make = tma.packed_map if variant.packed else tma.rows_map
        boxes = (tiles.block_rows, tiles.block_cols, tiles.block_cols)
        maps = tma.Maps(*((make, rows) for rows in boxes), *([(tma.rows_map, 64)] if o_map else []))
    walk = () if walk is None else (walk, source.by_value(np.int32(len(walk))))
    if ticketed:  # the number of units (the list's length, or the plain walk's count), the tickets
        walk = (*walk[:1], source.by_value(np.int32(units)), _tickets(device_id))
    return Plan(spec.row(p.d), launch, maps, o_map, not (gqa_alone or variant.plain), walk)


def launch(spec: registry.KernelSpec, p, tiles, q, k, v, o, lse, variant=PLAIN) -> None:
    """One launch of a forward kernel on prepared arrays (rows padded to the kernel's row length, outputs allocated);
    a variant adds its #defines and arguments. A persistent tiling (rung 6) launches at most one thread block per
    SM, for every variant but softcap and ALiBi (whose persistent builds spill at d = 64; run 38-var3): a packed
    batch's blocks walk a list of its real tiles (`packed_units`) and store O_i from registers (a TMA box of 64 rows
    would cross into the next sequence); one thread block per tile, a packed batch's grid is (Tr of the longest, Hq,
    B). GQA alone on rung 6 runs the plain build, K/V plane p / GROUP (run 38-var3). The launch is planned once per
    shape (`make_plan`); a call does what must be done per call: the tensor maps of its arrays, and the launch."""
    plan = make_plan(spec, p, tiles, variant_key(variant), q.device.id, device.require().cuda.get_current_stream().ptr)
    launch_plan(plan, p, q, k, v, o, lse, variant)


def launch_plan(plan: Plan, p, q, k, v, o, lse, variant) -> None:
    extra = (variant.args(p) if plan.variant_args else ()) + plan.walk
    if plan.maps:  # rung 6 reads Q, K, V through tensor maps (and stores O_i through one: the last argument)
        q, k, v, *o_map = plan.maps(q, k, v, o) if plan.o_map else plan.maps(q, k, v)
        extra += tuple(o_map)
    plan.launch((q, k, v, o, lse), extra)


def packed_units(seqlens: tuple[tuple[int, ...], tuple[int, ...]], heads: int, br: int, bc: int, causal: bool,
                 blocks: int) -> np.ndarray:  # fmt: skip
    """A packed batch's units for rung 6's persistent walk, laid out for `blocks` thread blocks: rows (b·Hq + h,
    first tile, second tile or −1, 0), int32; thread block x computes rows x, x + blocks, … (−1 rows: none).
    Each sequence b is cut into its own Tr = ⌈n_b / Br⌉ tiles, causal in pairs (Tr − 1 − q, q) as the plain walk.
    The units are dealt in rounds of `blocks`, heaviest first (K/V blocks read, causal by sequence, plus one a tile
    for its start and end), each round's heaviest to the thread block with the least work so far: a walk in order
    of sequences, head by head, left the busiest block 4–12% above the mean for lengths spread 2× (run 38-var3)."""
    rows, weights = [], []
    for b, (n, nk) in enumerate(zip(*seqlens, strict=True)):
        tr = -(-n // br)
        q = np.arange((tr + 1) // 2 if causal else tr)
        first, second = (tr - 1 - q, np.where(q != tr - 1 - q, q, -1)) if causal else (q, np.full_like(q, -1))
        last_key = np.minimum((np.arange(tr) + 1) * br, n) - 1 + nk - n  # causal: the last key a tile's rows see
        kv = np.clip(last_key // bc + 1, 0, -(-nk // bc)) if causal else np.full(tr, -(-nk // bc))
        plane = b * heads + np.repeat(np.arange(heads), len(q))
        rows.append(np.stack([plane, np.tile(first, heads), np.tile(second, heads), np.zeros_like(plane)], axis=1))
        weights.append(np.tile(kv[first] + 1 + np.where(second >= 0, kv[second] + 1, 0), heads))
    units, work = np.concatenate(rows), np.concatenate(weights)
    if len(units) <= blocks:
        return units.astype(np.int32)
    order = np.argsort(-work, kind="stable")  # heaviest first; equal work stays in sequence and head order
    table = np.full((-(-len(units) // blocks), blocks, 4), -1, dtype=np.int32)
    load = np.zeros(blocks)
    for r, start in enumerate(range(0, len(order), blocks)):
        chunk = order[start : start + blocks]
        lightest = np.argsort(load, kind="stable")[: len(chunk)]
        table[r, lightest] = units[chunk]
        load[lightest] += work[chunk]
    return table.reshape(-1, 4)


@functools.lru_cache(maxsize=64)
def _device_walk(planes: int, n: int, nk: int, br: int, bc: int, ticketed: bool, device_id: int, stream: int):
    """sim.machine.grids.causal_walk on the device, for as many thread blocks as SMs (a call of the same shape on
    the same stream reuses it), `ticketed`: in the order tickets take it (`_taken_in_order`). One list per stream:
    cupy.asarray copies on the current stream, asynchronously, and a kernel on another stream could read the list
    before that copy ran (as gpu.decoding's workspaces)."""
    cupy = device.require()
    with cupy.cuda.Device(device_id):
        units = causal_walk(planes, n, nk, br, bc, _sm_count(device_id))
        return cupy.asarray(_taken_in_order(units) if ticketed else units)


@functools.lru_cache(maxsize=256)
def _device_units(seqlens, heads: int, br: int, bc: int, causal: bool, ticketed: bool, device_id: int, stream: int):
    """packed_units on the device, for as many thread blocks as SMs (a call with the same lengths on the same stream
    reuses it: one list per stream, as _device_walk), `ticketed`: in the order tickets take it."""
    cupy = device.require()
    with cupy.cuda.Device(device_id):
        units = packed_units(seqlens, heads, br, bc, causal, _sm_count(device_id))
        return cupy.asarray(_taken_in_order(units) if ticketed else units)


def _taken_in_order(units: np.ndarray) -> np.ndarray:
    """A list laid out for thread block x to take rows x, x + blocks, … (−1 rows: none), as a ticketed kernel takes
    it (geometry.tickets): one unit after the other, by whichever thread block is ready (the rows in the same order,
    the −1 rows dropped)."""
    return np.ascontiguousarray(units[units[:, 0] >= 0])


def _tickets(device_id: int):
    """Rung 6's ticketed walk's two counters (the next unit, the thread blocks done), zero, on device `device_id`:
    the kernel's last thread block sets them back to zero, so every launch of a plan (a CUDA graph's replays too)
    starts from zero; each plan (a shape and a stream) has its own, so launches on two streams never share them.
    cupy.zeros writes the zeros on the current stream, the plan's, before its first launch there."""
    cupy = device.require()
    with cupy.cuda.Device(device_id):
        return cupy.zeros((2,), dtype=np.uint32)


@functools.cache
def _sm_count(device_id: int) -> int:
    return device.require().cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]
