"""`sim.ring`: one attention across P simulated devices, by ring attention or Ulysses, every byte counted.

Each device is a `Chip` of its own (`sim.machine.devices`); the listings are `sim.algorithms.ring` and
`sim.algorithms.ulysses`; `sim.machine.ring_model` holds the closed forms and the time per step.
"""

from dataclasses import asdict

import numpy as np

from sim.algorithms import ring as ring_
from sim.algorithms import ulysses
from sim.algorithms.registry import choose
from sim.api.inputs import check_choice, check_hardware, check_inputs, check_like_q, check_positive, check_scale
from sim.api.ring_result import Pass, Sharded
from sim.core.dtypes import DTYPES, F, dtype_name
from sim.core.errors import InputError
from sim.machine import ring_model
from sim.machine import sharding as sharding_
from sim.machine.devices import DEFAULT_LINK, Devices, link
from sim.machine.ledger import Ledger
from sim.machine.trace import Trace

SCHEMES = ("ring", "ulysses")
DEFAULT_HARDWARE = "H100-SXM"  # the GPU of the NVLink 4 preset


def ring(
    q, k, v, *, devices: int, scheme: str = "ring", sharding: str = "contiguous", causal: bool = False,
    scale: float | None = None, do=None, link_name=DEFAULT_LINK, hardware=DEFAULT_HARDWARE,
    sram_bytes: int | None = None, record: str = "counts", traced: int = 0,
) -> Sharded:  # fmt: skip
    """Self-attention of q, k, v (N, d) — or (B, H, N, d) — split over `devices` devices; with `do`, its backward.

    `scheme` "ring": Q shards stay, K/V shards go round (`sharding` "contiguous" or "zigzag"); "ulysses":
    all-to-all to whole heads (H divisible by P; contiguous rows). `link_name` is a `sim.machine.devices` preset
    or a `Link`; `hardware` the GPU of every device. `record="steps"` traces device `traced`'s forward.
    """
    check_choice("record", record, ("counts", "steps"))
    q, k, v = check_inputs(q, k, v)
    if k.shape != q.shape:
        raise InputError(f"k: shape {k.shape} must equal q's {q.shape}: the devices split one sequence (Nk = N)")
    *lead, N, d = q.shape
    grads = None if do is None else check_like_q(q, do=do)[0]
    heads = int(np.prod(lead, dtype=np.int64))
    c = _configure(devices, scheme, sharding, N, d, lead[1] if lead else 1, heads, dtype_name(q.dtype), causal,
                   scale, link_name, hardware, sram_bytes, grads is not None)  # fmt: skip
    if not (isinstance(traced, int) and not isinstance(traced, bool) and 0 <= traced < c["P"]):
        raise InputError(f"traced: device {traced!r} is not one of 0 … {c['P'] - 1}")
    run = _ulysses if scheme == "ulysses" else _ring
    o, lse, dqkv, tallies, trace = run(q, k, v, grads, c["P"], sharding, c["M"], c["tiles"], c["back"], record, traced)
    if trace is not None:  # the traced head's own closed form on its device (the pass's holds every head: 95)
        one = ring_model.ring_device(N, d, q.dtype.itemsize, c["P"], sharding, causal, c["tiles"]["Br"],
                                     c["tiles"]["Bc"])[traced]  # fmt: skip
        trace.config["closed_form"] = asdict(one)
        trace.config["sequence"] = N
    for tally, one in zip(tallies, c["passes"], strict=False):
        one.ledgers, one.sent, one.sram_peak_bytes = tally.ledgers, tally.sent, tally.peak
    return _result(c, output=o, lse=lse, trace=trace, **dict(zip(("dq", "dk", "dv"), dqkv or (), strict=False)))


def count_ring(
    *, n: int, d: int, devices: int, heads: int = 1, batch: int = 1, dtype: str = "fp16", scheme: str = "ring",
    sharding: str = "contiguous", causal: bool = False, backward: bool = False, link_name=DEFAULT_LINK,
    hardware=DEFAULT_HARDWARE, sram_bytes: int | None = None,
) -> Sharded:  # fmt: skip
    """`ring`'s counts and time from the closed forms alone, nothing simulated (`output` and the ledgers are None)."""
    for name, value in (("n", n), ("d", d), ("heads", heads), ("batch", batch)):
        check_positive(name, value)
    check_choice("dtype", dtype, DTYPES)
    c = _configure(devices, scheme, sharding, n, d, heads, batch * heads, dtype, causal, None, link_name, hardware,
                   sram_bytes, backward)  # fmt: skip
    return _result(c, output=None, lse=None)


def _configure(devices, scheme, sharding, N, d, H, heads, dtype, causal, scale, link_name, hardware, sram_bytes,
               backward) -> dict:  # fmt: skip
    """Everything checked, the blocks chosen, and each pass's closed forms and steps in time."""
    P = check_positive("devices", devices)
    check_choice("scheme", scheme, SCHEMES)
    if scheme == "ulysses":
        if sharding != "contiguous":
            raise InputError(f"sharding: Ulysses splits heads, not rows; {sharding!r} is for the ring")
        if H % P:
            raise InputError(f"devices: Ulysses gives each device H/P whole heads; H = {H} is not a multiple of {P}")
    sharding_.check(N, P, sharding)
    tau, (hw, M), s = check_scale(scale, d), check_hardware(hardware, sram_bytes), DTYPES[dtype].itemsize
    net = link(link_name)
    rows = N if scheme == "ulysses" else max(ring_model.sizes(N, P, sharding))
    Br, Bc = choose("flash2", "fit", rows, rows, d, s, M)
    bBr, bBc = choose("flash2", "fit", rows, rows, d, s, M, backward=True) if backward else (Br, Bc)
    common = dict(N=N, d=d, s=s, P=P, hw=hw, net=net, dtype=dtype, causal=causal, H=H, heads=heads)
    passes = [_pass(scheme, sharding, backward=False, Br=Br, Bc=Bc, **common)]
    if backward:
        passes.append(_pass(scheme, sharding, backward=True, Br=bBr, Bc=bBc, **common))
    if scheme == "ring":
        footprint = ring_model.ring_footprint(rows, d, s) * heads
    else:  # the largest shard has ⌈N/P⌉ rows
        footprint = ring_model.ulysses_footprint(N, -(-N // P), d, s, H, P) * (heads // H)
    return dict(
        P=P, M=M, passes=passes, tiles=dict(Br=Br, Bc=Bc, Bm=_pass_rows(Br, d, s, M), scale=tau, causal=causal),
        back=dict(Br=bBr, Bc=bBc, Bm=_pass_rows(bBr, d, s, M), scale=tau, causal=causal),
        result=dict(scheme=scheme, devices=P, sharding=sharding, causal=causal, scale=tau, dtype=dtype, n=N, d=d,
                    batch=heads // H, heads=H, hardware=hw, link=net, block_rows=Br, block_cols=Bc,
                    backward_blocks=(bBr, bBc), hbm_per_device=footprint),
    )  # fmt: skip


def _result(c: dict, **arrays) -> Sharded:
    passes = c["passes"]
    return Sharded(**c["result"], forward=passes[0], backward=passes[1] if len(passes) > 1 else None, **arrays)


def _pass_rows(Br: int, d: int, s: int, M: int) -> int:
    """Rows per block of the merge, accumulate and cast passes: Br, or fewer where its buffers would not fit."""
    per_row = d * (2 * F + s) + 6 * F  # the merge's: O_run, O_new float32 and O_t stored; four statistics
    if per_row > M:
        raise InputError(f"sram_bytes: {M} B cannot hold one row of the ring's merge ({per_row} B at d = {d})")
    return min(Br, M // per_row)


def _ring(q, k, v, do, P, sharding, M, tiles, back, record, traced):
    """Every (batch, head) on its own P devices; per device, ledgers summed over heads."""
    N = q.shape[-2]
    held = sharding_.shards(N, P, sharding)
    o, lse = np.empty_like(q), np.empty(q.shape[:-1], np.float32)
    dqkv = [np.empty_like(q) for _ in range(3)] if do is not None else None
    tallies, trace, first = (_Tally(P), _Tally(P)), None, None
    for n, head in enumerate(np.ndindex(*q.shape[:-2])):
        if n == 0 and record == "steps":
            trace = _new_trace(q.shape, held[traced], M, tiles, P, sharding, traced)
        fwd = Devices(P, M, trace if n == 0 else None, traced)
        first = first or fwd
        _place(fwd, held, {"Q_p": q[head], "K_p": k[head], "V_p": v[head]})
        ring_.forward(fwd, held, **tiles)
        _gather(fwd, held, {"O_p": o[head], "L_run": lse[head]})
        tallies[0].add(fwd)
        if do is not None:
            bwd = Devices(P, M)
            arrays = {"Q_p": q[head], "K_p": k[head], "V_p": v[head], "O_p": o[head], "dO_p": do[head],
                      "L_p": lse[head]}  # fmt: skip
            _place(bwd, held, arrays)
            ring_.backward(bwd, held, **back)
            _gather(bwd, held, {"dQ_p": dqkv[0][head], "dK_p": dqkv[1][head], "dV_p": dqkv[2][head]})
            tallies[1].add(bwd)
    if trace is not None:
        trace.config["dtype"] = dtype_name(q.dtype)
        trace.hbm = {
            t: {"shape": list(a.shape), "dtype": str(a.dtype)} for t, a in first.chips[traced].hbm.tensors.items()
        }
    return o, lse, dqkv, tallies, trace


def _ulysses(q, k, v, do, P, sharding, M, tiles, back, record, traced):
    """Every batch index on P devices holding all H heads."""
    del sharding, record, traced  # contiguous rows; no trace of the all-to-alls
    tiles, back = ({key: x for key, x in t.items() if key != "Bm"} for t in (tiles, back))
    q4, k4, v4 = (x if x.ndim == 4 else x[None, None] for x in (q, k, v))
    do4 = None if do is None else (do if do.ndim == 4 else do[None, None])
    B, H, N, _ = q4.shape
    held = sharding_.shards(N, P, "contiguous")
    o, lse = np.empty_like(q4), np.empty(q4.shape[:-1], np.float32)
    dqkv = [np.empty_like(q4) for _ in range(3)] if do is not None else None
    tallies = (_Tally(P), _Tally(P))
    for b in range(B):
        fwd = Devices(P, M)
        _place(fwd, held, {"Q_p": q4[b], "K_p": k4[b], "V_p": v4[b]}, axis=1)
        ulysses.forward(fwd, H=H, **tiles)
        _gather(fwd, held, {"O_p": o[b]}, axis=1)
        per = H // P
        for r, chip in enumerate(fwd.chips):  # the caller reads L where the forward left it, in the head layout
            lse[b, r * per : (r + 1) * per] = chip.hbm.tensors["L_heads"]
        tallies[0].add(fwd)
        if do is not None:
            bwd = Devices(P, M)
            _place(bwd, held, {"dO_p": do4[b], "Q_p": q4[b]}, axis=1)
            for X in ("Q", "K", "V", "O", "L"):  # the forward's head-layout tensors stay in each device's HBM
                for p, chip in enumerate(bwd.chips):
                    chip.hbm.place(f"{X}_heads", fwd.chips[p].hbm.tensors[f"{X}_heads"])
            ulysses.backward(bwd, H=H, **back)
            _gather(bwd, held, {"dQ_p": dqkv[0][b], "dK_p": dqkv[1][b], "dV_p": dqkv[2][b]}, axis=1)
            tallies[1].add(bwd)
    shape = q.shape
    o, lse = o.reshape(shape), lse.reshape(shape[:-1])
    dqkv = None if dqkv is None else [x.reshape(shape) for x in dqkv]
    return o, lse, dqkv, tallies, None


def _place(devices: Devices, held, arrays: dict, axis: int = 0) -> None:
    """Device p's chunks of each array (rows along `axis`) in its HBM, one after another (inputs are there)."""
    for p, chip in enumerate(devices.chips):
        for name, x in arrays.items():
            parts = [np.take(x, range(r0, r1), axis=axis) for r0, r1 in held[p]]
            chip.hbm.place(name, np.concatenate(parts, axis=axis))


def _gather(devices: Devices, held, outputs: dict, axis: int = 0) -> None:
    """Each device's result back at its global rows: outputs {HBM tensor: destination array}."""
    for p, chip in enumerate(devices.chips):
        for name, out in outputs.items():
            at = 0
            for r0, r1 in held[p]:
                index = [slice(None)] * out.ndim
                index[axis] = slice(r0, r1)
                local = [slice(None)] * out.ndim
                local[axis] = slice(at, at + r1 - r0)
                out[tuple(index)] = chip.hbm.tensors[name][tuple(local)]
                at += r1 - r0


class _Tally:
    """One pass's counts per device, summed over the heads (or batch indices) it ran."""

    def __init__(self, P: int):
        self.ledgers, self.sent, self.peak = [Ledger() for _ in range(P)], [0] * P, 0

    def add(self, devices: Devices) -> None:
        for p, chip in enumerate(devices.chips):
            self.ledgers[p].add(chip.ledger)
            self.sent[p] += devices.sent[p]
            self.peak = max(self.peak, chip.sram.peak)


def _pass(scheme, sharding, *, backward, N, d, s, P, Br, Bc, hw, net, dtype, causal, H, heads) -> Pass:
    """A pass's closed forms (every head) and its steps in time; the simulation fills in what it counted."""
    if scheme == "ring":
        one = ring_model.ring_device(N, d, s, P, sharding, causal, Br, Bc, backward=backward)
        closed, link_bytes = (
            [c.times(heads) for c in one],
            ring_model.ring_link(N, d, s, P, sharding, backward=backward),
        )
        link_bytes = [b * heads for b in link_bytes]
        steps = ring_model.ring_time(N, d, s, P, sharding, causal, Br, Bc, heads, hw, net, dtype, backward=backward)
    else:
        batch = heads // H
        closed = [c.times(batch) for c in ring_model.ulysses_device(N, d, s, P, H, causal, Br, Bc, backward=backward)]
        before, after = ring_model.ulysses_link(N, d, s, P, H, backward=backward)
        link_bytes = [batch * (x + y) for x, y in zip(before, after, strict=True)]
        steps = ring_model.ulysses_time(N, d, s, P, H, causal, Br, Bc, batch, hw, net, dtype, backward=backward)
    return Pass(closed_form=closed, closed_link=link_bytes, steps=steps)


def _new_trace(shape, chunks, M: int, tiles: dict, P: int, sharding: str, traced: int) -> Trace:
    """An empty trace of device `traced`'s forward, configured as the viewer reads it."""
    n = sum(r1 - r0 for r0, r1 in chunks)
    config = dict(n=n, nk=n, d=shape[-1], dtype=None, causal=tiles["causal"], scale=tiles["scale"],
                  block_rows=tiles["Br"], block_cols=tiles["Bc"], sram_bytes=M, devices=P, sharding=sharding,
                  device=traced, rows=[list(c) for c in chunks])  # fmt: skip
    return Trace(f"ring attention, device {traced} of {P}", config, hbm={})
