"""`sim.run`: check the inputs, pick blocks, run an algorithm through the memory model, collect the result."""

from dataclasses import dataclass
from itertools import product

import numpy as np

from sim import blocks as blocks_
from sim import dropout as dropout_
from sim import hardware as hardware_
from sim import mask, reference
from sim.algorithms import backward as backward_
from sim.algorithms import decoding, flash1, flash2, standard
from sim.dtypes import DTYPES, dtype_name
from sim.errors import InputError
from sim.memory import Chip, Ledger
from sim.trace import Trace

ALGORITHMS = {"standard": standard.forward, "flash1": flash1.forward, "flash2": flash2.forward}
RECORDS = ("counts", "steps", "values")
BLOCK_RULES = ("fit", "paper")


@dataclass
class Result:
    """What a simulated run produced and what it cost. Byte and FLOP counts cover every head."""

    algorithm: str
    output: np.ndarray | None  # (N, d) or (B, H, N, d), in the storage dtype; None for `count`
    lse: np.ndarray | None  # flash2's log-sum-exp L, float32; None for the others
    stats: dict  # other per-row statistics left in HBM: flash1's ℓ and m
    ledger: Ledger
    block_rows: int
    block_cols: int
    sram_bytes: int
    sram_peak_bytes: int
    scale: float
    causal: bool
    dtype: str
    hardware: hardware_.Hardware
    heads: int  # batch × heads that were counted
    n: int
    nk: int
    d: int
    trace: Trace | None = None  # record="steps" or "values": the first head's steps
    dropout_p: float = 0.0
    seed: int | None = None  # the dropout generator's seed: all the backward pass needs to redraw the mask

    @property
    def hbm_read_bytes(self) -> int:
        return self.ledger.hbm_read_bytes

    @property
    def hbm_write_bytes(self) -> int:
        return self.ledger.hbm_write_bytes

    @property
    def hbm_bytes(self) -> int:
        return self.ledger.hbm_read_bytes + self.ledger.hbm_write_bytes

    @property
    def flops(self) -> int:
        return self.ledger.flops

    @property
    def exps(self) -> int:
        return self.ledger.work["exp"]


def run(
    algorithm: str,
    q,
    k,
    v,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_rows: int | None = None,
    block_cols: int | None = None,
    blocks: str = "fit",
    sram_bytes: int | None = None,
    hardware: str | hardware_.Hardware | None = None,
    record: str = "counts",
    row: int | None = None,
    dropout_p: float = 0.0,
    seed: int | None = None,
) -> Result:
    """Run `algorithm` ("standard", "flash1" or "flash2") on q (N, d), k and v (Nk, d) — or (B, H, ·, d).

    The inputs' dtype is the storage dtype (float16, bfloat16 or float32; float64 is stored
    as float32). Blocks not given are chosen by `blocks`: "fit" (the largest that fit the
    SRAM) or "paper" (the paper's rule, refused with the buffer sizes if it does not fit).
    `record` is "counts", "steps" (a Trace of the first head) or "values" (with values);
    `row` keeps the values of that one query row only, which keeps big traces small.
    `dropout_p` > 0 drops attention probabilities (flash1, flash2) with a mask drawn from
    `seed` (a fresh one if None, returned as `Result.seed`), as FlashAttention's Algorithm 2.
    """
    _check_choice("algorithm", algorithm, ALGORITHMS)
    dropout_p, seed = _check_dropout(algorithm, dropout_p, seed, seed_needed=False)
    if dropout_p > 0 and seed is None:
        seed = int(np.random.default_rng().integers(2**63))
    _check_choice("record", record, RECORDS)
    q, k, v = check_inputs(q, k, v)
    *lead, N, d = q.shape
    Nk = k.shape[-2]
    scale = _check_scale(scale, d)
    _check_row(row, N)
    setup = _setup(algorithm, N, Nk, d, q.dtype, block_rows, block_cols, blocks, sram_bytes, hardware)
    Br, Bc, M, hw = setup

    output = np.empty(q.shape, q.dtype)
    stat_names = {"flash2": ("L",), "flash1": ("ℓ", "m")}.get(algorithm, ())
    stats = {name: np.empty((*lead, N), np.float32) for name in stat_names}

    def one_head(chip: Chip, head: tuple, n: int) -> None:
        drop = dropout_.Dropout(dropout_p, seed, n) if dropout_p > 0 else None
        _run_head(chip, algorithm, q[head], k[head], v[head], Br, Bc, scale, causal, drop)
        output[head] = chip.hbm.tensors["O"]
        for name in stat_names:
            stats[name][head] = chip.hbm.tensors[name]

    def new_trace(head: tuple) -> Trace:
        return _new_trace(algorithm, N, Nk, d, q.dtype, causal, scale, setup, record, head, q, k, v)

    ledger, peak, trace = _each_head(lead, M, record, row, new_trace, one_head)
    if trace is not None and record == "values":
        trace.output = output[(0,) * len(lead)].astype(np.float64).tolist()
    lse = stats.pop("L", None)
    return Result(
        algorithm, output, lse, stats, ledger, Br, Bc, M, peak, scale, causal, dtype_name(q.dtype), hw,
        int(np.prod(lead, dtype=np.int64)), N, Nk, d, trace, dropout_p, seed,
    )  # fmt: skip


def count(
    algorithm: str,
    *,
    n: int,
    d: int,
    nk: int | None = None,
    batch: int = 1,
    heads: int = 1,
    dtype: str = "fp16",
    causal: bool = False,
    scale: float | None = None,
    block_rows: int | None = None,
    block_cols: int | None = None,
    blocks: str = "fit",
    sram_bytes: int | None = None,
    hardware: str | hardware_.Hardware | None = None,
    dropout_p: float = 0.0,
) -> Result:
    """The ledger of `run` for batch × heads heads, without their numerics.

    Every head moves the same tiles, so one head is simulated (on seeded random data)
    and its ledger counted batch × heads times; `output` is None.
    """
    _check_choice("dtype", dtype, DTYPES)
    for name, value in (("batch", batch), ("heads", heads)):
        _check_positive(name, value)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((rows, d)).astype(DTYPES[dtype]) for rows in (n, nk or n, nk or n))
    one = run(
        algorithm, q, k, v, causal=causal, scale=scale, block_rows=block_rows, block_cols=block_cols,
        blocks=blocks, sram_bytes=sram_bytes, hardware=hardware, dropout_p=dropout_p,
    )  # fmt: skip
    ledger = Ledger()
    ledger.add(one.ledger, batch * heads)
    one.ledger, one.heads, one.output, one.lse, one.stats = ledger, batch * heads, None, None, {}
    return one


def _each_head(lead, M: int, record: str, row, new_trace, one_head) -> tuple[Ledger, int, Trace | None]:
    """Run `one_head(chip, head, n)` on a fresh Chip for every (batch, head) index in `lead`, tracing the first
    when `record` asks; returns the summed ledger, the SRAM peak and the trace."""
    ledger, peak, trace = Ledger(), 0, None
    for n, head in enumerate(product(*(range(x) for x in lead))):
        if n == 0 and record != "counts":
            trace = new_trace(head)
            chip = Chip(M, record, trace, row)
        else:
            chip = Chip(M)
        one_head(chip, head, n)
        ledger.add(chip.ledger)
        peak = max(peak, chip.sram.peak)
        if n == 0 and trace is not None:
            trace.hbm = {t: {"shape": list(a.shape), "dtype": str(a.dtype)} for t, a in chip.hbm.tensors.items()}
    return ledger, peak, trace


def _run_head(chip: Chip, algorithm, q, k, v, Br, Bc, scale, causal, dropout=None) -> None:
    for name, x in (("Q", q), ("K", k), ("V", v)):
        chip.hbm.place(name, x)
    extra = {} if dropout is None else {"dropout": dropout}
    ALGORITHMS[algorithm](chip, Br=Br, Bc=Bc, scale=scale, causal=causal, **extra)


def _setup(algorithm, N, Nk, d, dtype, block_rows, block_cols, blocks, sram_bytes, hardware):
    """Resolve hardware, SRAM size and blocks: (Br, Bc, sram_bytes, hardware)."""
    _check_choice("blocks", blocks, BLOCK_RULES)
    hw = hardware if isinstance(hardware, hardware_.Hardware) else hardware_.get(hardware or hardware_.DEFAULT)
    M = hw.sram_bytes if sram_bytes is None else _check_positive("sram_bytes", sram_bytes)
    s = np.dtype(dtype).itemsize
    for name, value in (("block_rows", block_rows), ("block_cols", block_cols)):
        if value is not None:
            _check_positive(name, value)
    if blocks == "paper" and block_rows is None and block_cols is None:
        Br, Bc = blocks_.paper(M, d, s)
        blocks_.check_fits(
            algorithm, min(Br, N), min(Bc, Nk), d, s, M, "the paper's rule Bc = ⌈M/4d⌉, Br = min(Bc, d) gives "
        )
        return Br, Bc, M, hw
    Br, Bc = blocks_.fit(algorithm, N, Nk, d, s, M, block_rows, block_cols)
    return Br, Bc, M, hw


def _new_trace(algorithm, N, Nk, d, dtype, causal, scale, setup, record, head, q, k, v) -> Trace:
    Br, Bc, M, hw = setup
    config = {
        "n": N, "nk": Nk, "d": d, "dtype": dtype_name(dtype), "causal": causal, "scale": scale,
        "block_rows": Br, "block_cols": Bc, "sram_bytes": M, "hardware": hw.name, "head": list(head),
    }  # fmt: skip
    inputs = None
    if record == "values":
        inputs = {name: x[head].astype(np.float64).tolist() for name, x in (("q", q), ("k", k), ("v", v))}
    return Trace(algorithm, config, hbm={}, inputs=inputs)


def check_inputs(q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate q, k, v and return them in their storage dtype (float64 becomes float32)."""
    arrays = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise InputError(f"{name}: not an array ({e})") from None
        if x.dtype == np.float64:
            with np.errstate(over="ignore"):  # values beyond float32 become ±inf, refused below
                x = x.astype(np.float32)
        if x.dtype not in DTYPES.values():
            raise InputError(f"{name}: dtype {x.dtype} is not supported; use float16, bfloat16, float32 or float64")
        if x.ndim not in (2, 4):
            raise InputError(
                f"{name}: shape {x.shape} has {x.ndim} dimensions; expected (N, d) or (batch, heads, N, d)"
            )
        arrays.append(x)
    q, k, v = arrays
    if not (q.dtype == k.dtype == v.dtype):
        raise InputError(f"k, v: dtypes {k.dtype}, {v.dtype} differ from q's {q.dtype}; q, k and v share one dtype")
    if q.ndim != k.ndim or q.shape[:-2] != k.shape[:-2]:
        raise InputError(f"k: shape {k.shape} does not match q's {q.shape} in the batch and head dimensions")
    if k.shape != v.shape:
        raise InputError(f"v: shape {v.shape} must equal k's {k.shape} (Nk, d)")
    if q.shape[-1] != k.shape[-1]:
        raise InputError(f"k: head dimension {k.shape[-1]} differs from q's {q.shape[-1]}; q, k, v share d")
    if q.shape[-1] < 1:
        raise InputError("d: head dimension must be at least 1, got 0")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if min(x.shape) < 1:
            raise InputError(f"{name}: shape {x.shape} has an empty dimension; N, Nk, batch and heads must be ≥ 1")
        if not np.isfinite(x).all():
            raise InputError(f"{name}: contains NaN or Inf (or values beyond {x.dtype}'s range); inputs must be finite")
    return q, k, v


def _check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise InputError(f"{name}: unknown {value!r}; choose one of {', '.join(allowed)}")


def _check_positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name}: must be a positive integer, got {value!r}")
    return int(value)


def _check_row(row, N: int) -> None:
    if row is not None and (isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < N):
        raise InputError(f"row: {row!r} is outside the matrix; query rows are 0 … {N - 1} (N = {N})")


def _check_scale(scale, d: int) -> float:
    if scale is None:
        return 1.0 / np.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) or not np.isfinite(scale):
        raise InputError(f"scale: must be a finite number, got {scale!r}")
    return float(scale)


# -- the backward pass ---------------------------------------------------------------


@dataclass
class Gradients:
    """What a simulated backward pass produced and what it cost. Byte and FLOP counts cover every head."""

    algorithm: str
    dq: np.ndarray | None  # (N, d) or (B, H, N, d), in the storage dtype; None for `count_backward`
    dk: np.ndarray | None  # (Nk, d) or (B, H, Nk, d)
    dv: np.ndarray | None
    ledger: Ledger
    block_rows: int
    block_cols: int
    sram_bytes: int
    sram_peak_bytes: int
    scale: float
    causal: bool
    dtype: str
    hardware: hardware_.Hardware
    heads: int  # batch × heads that were counted
    n: int
    nk: int
    d: int
    dropout_p: float = 0.0
    seed: int | None = None
    trace: Trace | None = None  # record="steps" or "values": the first head's steps

    @property
    def hbm_read_bytes(self) -> int:
        return self.ledger.hbm_read_bytes

    @property
    def hbm_write_bytes(self) -> int:
        return self.ledger.hbm_write_bytes

    @property
    def hbm_bytes(self) -> int:
        return self.ledger.hbm_read_bytes + self.ledger.hbm_write_bytes

    @property
    def flops(self) -> int:
        return self.ledger.flops

    @property
    def exps(self) -> int:
        return self.ledger.work["exp"]


def backward(
    algorithm: str,
    q,
    k,
    v,
    o,
    lse_or_stats,
    do,
    *,
    causal: bool = False,
    scale: float | None = None,
    block_rows: int | None = None,
    block_cols: int | None = None,
    blocks: str = "fit",
    dropout_p: float = 0.0,
    seed: int | None = None,
    sram_bytes: int | None = None,
    hardware: str | hardware_.Hardware | None = None,
    record: str = "counts",
    row: int | None = None,
) -> Gradients:
    """dQ, dK, dV of `algorithm`'s backward pass, for the forward output o and the upstream gradient do.

    q, o, do are (N, d) and k, v (Nk, d) — or (B, H, ·, d) — in one storage dtype.
    `lse_or_stats` is what the forward pass left in HBM: the log-sum-exp L (…, N) (any
    algorithm), or `Result.stats` of flash1 ({"ℓ", "m"}), or for standard attention
    {"P": P} with P (…, N, Nk); given L, standard attention's P is rebuilt as
    exp(τ q kᵀ − L) in float64, rounded to the storage dtype, and placed in HBM unbooked,
    as the forward pass would have left it. With dropout, pass the forward's `seed`.
    `record` and `row` are as for `run`.
    """
    _check_choice("algorithm", algorithm, backward_.ALGORITHMS)
    _check_choice("record", record, RECORDS)
    dropout_p, seed = _check_dropout(algorithm, dropout_p, seed, seed_needed=True)
    q, k, v = check_inputs(q, k, v)
    o, do = _check_like_q(q, o=o, do=do)
    *lead, N, d = q.shape
    Nk = k.shape[-2]
    scale = _check_scale(scale, d)
    stats = _backward_stats(algorithm, lse_or_stats, q, k, scale, causal)
    _check_row(row, N)
    Br, Bc, M, hw = _setup_backward(algorithm, N, Nk, d, q.dtype, block_rows, block_cols, blocks, sram_bytes, hardware)

    dq, dk, dv = np.empty(q.shape, q.dtype), np.empty(k.shape, q.dtype), np.empty(k.shape, q.dtype)

    def one_head(chip: Chip, head: tuple, n: int) -> None:
        for name, x in (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do), *stats.items()):
            chip.hbm.place(name, x[head])
        drop = dropout_.Dropout(dropout_p, seed, n) if dropout_p > 0 else None
        backward_.ALGORITHMS[algorithm](chip, Br=Br, Bc=Bc, scale=scale, causal=causal, dropout=drop)
        dq[head], dk[head], dv[head] = (chip.hbm.tensors[t] for t in ("dQ", "dK", "dV"))

    def new_trace(head: tuple) -> Trace:
        setup = (Br, Bc, M, hw)
        return _new_trace(f"{algorithm} backward", N, Nk, d, q.dtype, causal, scale, setup, record, head, q, k, v)

    ledger, peak, trace = _each_head(lead, M, record, row, new_trace, one_head)
    return Gradients(
        algorithm, dq, dk, dv, ledger, Br, Bc, M, peak, scale, causal, dtype_name(q.dtype), hw,
        int(np.prod(lead, dtype=np.int64)), N, Nk, d, dropout_p, seed, trace,
    )  # fmt: skip


def count_backward(
    algorithm: str,
    *,
    n: int,
    d: int,
    nk: int | None = None,
    batch: int = 1,
    heads: int = 1,
    dtype: str = "fp16",
    causal: bool = False,
    scale: float | None = None,
    block_rows: int | None = None,
    block_cols: int | None = None,
    blocks: str = "fit",
    sram_bytes: int | None = None,
    hardware: str | hardware_.Hardware | None = None,
    dropout_p: float = 0.0,
) -> Gradients:
    """The ledger of `backward` for batch × heads heads, without their numerics (one head simulated)."""
    _check_choice("dtype", dtype, DTYPES)
    for name, value in (("n", n), ("d", d), ("batch", batch), ("heads", heads)):
        _check_positive(name, value)
    nk = n if nk is None else _check_positive("nk", nk)
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((rows, d)).astype(DTYPES[dtype]) for rows in (n, nk, nk, n))
    o, lse = reference.attention(q, k, v, causal=causal, scale=scale)
    one = backward(
        algorithm, q, k, v, o.astype(q.dtype), lse, do, causal=causal, scale=scale, block_rows=block_rows,
        block_cols=block_cols, blocks=blocks, dropout_p=dropout_p, seed=0 if dropout_p else None,
        sram_bytes=sram_bytes, hardware=hardware,
    )  # fmt: skip
    ledger = Ledger()
    ledger.add(one.ledger, batch * heads)
    one.ledger, one.heads, one.dq, one.dk, one.dv = ledger, batch * heads, None, None, None
    return one


def _check_dropout(algorithm, dropout_p, seed, *, seed_needed: bool) -> tuple[float, int | None]:
    dropout_p, seed = dropout_.check(dropout_p, seed, seed_needed=seed_needed)
    if dropout_p > 0 and algorithm == "standard":
        raise InputError("dropout_p: standard attention (Algorithm 0) has no dropout here; use flash1 or flash2")
    return dropout_p, seed


def _check_like_q(q: np.ndarray, **arrays) -> list[np.ndarray]:
    """Validate arrays that share q's shape and storage dtype (the output o, its gradient do)."""
    out = []
    for name, x in arrays.items():
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise InputError(f"{name}: not an array ({e})") from None
        if x.dtype == np.float64 and q.dtype == np.float32:
            x = x.astype(np.float32)
        if x.shape != q.shape:
            raise InputError(f"{name}: shape {x.shape} must equal q's {q.shape}")
        if x.dtype != q.dtype:
            raise InputError(f"{name}: dtype {x.dtype} differs from q's {q.dtype}; q, k, v, o and do share one dtype")
        if not np.isfinite(x).all():
            raise InputError(f"{name}: contains NaN or Inf; it must be finite")
        out.append(x)
    return out


def _backward_stats(algorithm, lse_or_stats, q, k, scale, causal) -> dict[str, np.ndarray]:
    """The statistics the backward reads from HBM: {"P"} (standard), {"ℓ", "m"} (flash1) or {"L"} (flash2)."""
    *lead, N, _ = q.shape
    Nk = k.shape[-2]
    wanted = {"standard": ("P",), "flash1": ("ℓ", "m"), "flash2": ("L",)}[algorithm]
    if isinstance(lse_or_stats, dict) and set(wanted) <= set(lse_or_stats):
        given = {name: lse_or_stats[name] for name in wanted}
    elif isinstance(lse_or_stats, dict) and "L" in lse_or_stats:
        given = {"L": lse_or_stats["L"]}
    elif isinstance(lse_or_stats, dict):
        raise InputError(
            f"lse_or_stats: the {algorithm} backward needs {' and '.join(wanted)} (or the log-sum-exp L); "
            f"got {', '.join(map(str, lse_or_stats)) or 'an empty dict'}"
        )
    else:
        given = {"L": lse_or_stats}
    stats = {}
    for name, x in given.items():
        shape = (*lead, N, Nk) if name == "P" else (*lead, N)
        try:
            x = np.asarray(x, dtype=q.dtype if name == "P" else np.float32)
        except (TypeError, ValueError) as e:
            raise InputError(f"lse_or_stats: {name} is not an array of numbers ({e})") from None
        if x.shape != tuple(shape):
            raise InputError(f"lse_or_stats: {name} has shape {x.shape}; expected {tuple(shape)}")
        if np.isnan(x).any() or np.isposinf(x).any() or (name != "L" and name != "m" and np.isinf(x).any()):
            raise InputError(
                f"lse_or_stats: {name} contains NaN or Inf (only L and m may be −∞, for rows that see no key)"
            )
        stats[name] = x
    if "L" in stats and algorithm == "flash1":  # P = exp(S − m)/ℓ with m = L, ℓ = 1 is exp(S − L)
        return {"ℓ": np.ones_like(stats["L"]), "m": stats["L"]}
    if "L" in stats and algorithm == "standard":  # as the forward pass left it
        s = scale * (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2))
        if causal:
            s = np.where(mask.visible(0, N, 0, Nk, N, Nk), s, -np.inf)
        L = stats["L"].astype(np.float64)[..., None]
        return {"P": np.exp(s - np.where(np.isneginf(L), np.inf, L)).astype(q.dtype)}
    return stats


def _setup_backward(algorithm, N, Nk, d, dtype, block_rows, block_cols, blocks, sram_bytes, hardware):
    """Resolve hardware, SRAM size and the backward pass's blocks: (Br, Bc, sram_bytes, hardware)."""
    _check_choice("blocks", blocks, BLOCK_RULES)
    hw = hardware if isinstance(hardware, hardware_.Hardware) else hardware_.get(hardware or hardware_.DEFAULT)
    M = hw.sram_bytes if sram_bytes is None else _check_positive("sram_bytes", sram_bytes)
    s = np.dtype(dtype).itemsize
    for name, value in (("block_rows", block_rows), ("block_cols", block_cols)):
        if value is not None:
            _check_positive(name, value)
    if blocks == "paper" and block_rows is None and block_cols is None:
        return (*backward_.paper_blocks(algorithm, N, Nk, d, s, M), M, hw)
    return (*backward_.fit(algorithm, N, Nk, d, s, M, block_rows, block_cols), M, hw)


# -- Flash-Decoding --------------------------------------------------------------------


@dataclass
class Decoded:
    """What a simulated Flash-Decoding run produced and cost. Byte and FLOP counts cover every head."""

    output: np.ndarray  # (Nq, d) or (B, H, Nq, d), in the storage dtype
    lse: np.ndarray  # (…, Nq) float32
    ledger: Ledger
    splits: int
    block_cols: int
    sram_bytes: int
    sram_peak_bytes: int
    scale: float
    causal: bool
    dtype: str
    hardware: hardware_.Hardware
    heads: int  # batch × heads
    n: int  # query rows
    nk: int
    d: int
    occupancy: decoding.Occupancy  # the SM model for this batch × heads and this many splits
    trace: Trace | None = None

    @property
    def hbm_bytes(self) -> int:
        return self.ledger.hbm_read_bytes + self.ledger.hbm_write_bytes

    @property
    def flops(self) -> int:
        return self.ledger.flops


def decode(
    q,
    k,
    v,
    *,
    splits: int | None = None,
    causal: bool = False,
    scale: float | None = None,
    block_cols: int | None = None,
    sram_bytes: int | None = None,
    hardware: str | hardware_.Hardware | None = None,
    record: str = "counts",
) -> Decoded:
    """Flash-Decoding of a few query rows q (Nq, d) against a long k, v (Nk, d) — or (B, H, ·, d).

    The keys are split into `splits` chunks (None: the number the SM model of
    `decoding.occupancy` finds fastest for this batch × heads on `hardware`); each chunk's
    partial output and log-sum-exp are then combined. Causal masks align bottom-right.
    """
    _check_choice("record", record, RECORDS)
    q, k, v = check_inputs(q, k, v)
    *lead, Nq, d = q.shape
    Nk = k.shape[-2]
    scale = _check_scale(scale, d)
    hw = hardware if isinstance(hardware, hardware_.Hardware) else hardware_.get(hardware or hardware_.DEFAULT)
    M = hw.sram_bytes if sram_bytes is None else _check_positive("sram_bytes", sram_bytes)
    s = q.dtype.itemsize
    heads = int(np.prod(lead, dtype=np.int64))
    if splits is None:
        splits = decoding.best_splits(heads, 1, Nq, Nk, d, s, hw)
    elif _check_positive("splits", splits) > Nk:
        raise InputError(f"splits: {splits} chunks of the {Nk} keys would leave some empty; choose 1 … {Nk}")
    Bc = decoding.fit(Nq, Nk, d, s, M, splits) if block_cols is None else _check_positive("block_cols", block_cols)
    need = sum(decoding.footprint(Nq, Bc, d, s, splits).values())
    if need > M:
        raise InputError(f"block_cols: Bc={Bc} needs {need} bytes of SRAM for Flash-Decoding but the SRAM holds {M}")

    output, lse = np.empty(q.shape, q.dtype), np.empty((*lead, Nq), np.float32)
    ledger, peak, trace = Ledger(), 0, None
    for n, head in enumerate(product(*(range(x) for x in lead))):
        if n == 0 and record != "counts":
            trace = _new_trace("decode", Nq, Nk, d, q.dtype, causal, scale, (Nq, Bc, M, hw), record, head, q, k, v)
            trace.config["splits"] = splits
            chip = Chip(M, record, trace)
        else:
            chip = Chip(M)
        for name, x in (("Q", q), ("K", k), ("V", v)):
            chip.hbm.place(name, x[head])
        decoding.forward(chip, Bc=Bc, splits=splits, scale=scale, causal=causal)
        output[head], lse[head] = chip.hbm.tensors["O"], chip.hbm.tensors["L"]
        ledger.add(chip.ledger)
        peak = max(peak, chip.sram.peak)
    occ = decoding.occupancy(heads, 1, splits, Nq, Nk, d, s, hw, Bc)
    return Decoded(
        output, lse, ledger, splits, Bc, M, peak, scale, causal, dtype_name(q.dtype), hw, heads, Nq, Nk, d, occ, trace
    )
