"""What a command will cost, before it starts; and the one-line refusal of what would not fit or would take too long.

time ≈ tile pairs × the listing's per-pair overhead + the work in them (matmul FLOPs, exponentials, elements
written to HBM), with the work taken from the registry's closed forms. The constants are fitted on this project's
machine (2 cores of an Intel Xeon, Python 3.11, NumPy 2.4, one BLAS thread) to 54 full-numerics runs of the three
listings (N = 1,024 … 8,192, d = 16 … 128, fp16 and fp32, blocks 8 … 128), which the model predicts within
0.54×–1.9×: an estimate says "about", and refuses only what is far over the limit.
memory ≈ what is held to the end (the inputs and outputs of every head, the recorded steps) + the largest of
the phases' temporaries (the float64 draw of the inputs; what the chip holds for one head, its HBM tensors and
their float32 copies, N × Nk ones where the forward leaves P; the float64 reference's copies and one block of rows).
Grading and `demo train` go at the pace of their recorded runs (the README's `bench grade`, gpu/lab/results/train-h100.json).
"""

import os
from dataclasses import dataclass
from math import ceil, nan

import click

from sim.algorithms import registry
from sim.algorithms.registry import get
from sim.api import reference
from sim.cli.options import typed
from sim.core.dtypes import DTYPES, F
from sim.core.errors import InputError
from sim.core.format import count, duration, human_bytes
from sim.machine.memory import MAX_TRACE_STEPS

LIMIT_SECONDS = 30.0  # what would take longer is refused up front (FLASHSIM_MAX_SECONDS raises the limit)
PER_PAIR = 200e-6  # seconds of Python per tile pair: the chip's loads, puts, stores and bookkeeping (50 µs before h2)
PER_FLOP = 20e-12  # a tile-sized float32 matmul, per FLOP (×2 and the reference's ×3.5, fitted in issue h2 to `run`
PER_EXP = 12e-9  # at N = 8192, 16384, 24576 on a 2-core EPYC that other work shares: 3.7 s, 12.9 s, 27.6 s)
PER_WRITE = {2: 25e-9, 4: 3e-9}  # per element written to HBM, by itemsize (a cast to fp16/bf16 is slow)
PER_INPUT = 40e-9  # per input element of every head: drawn in float64, cast to storage, mirrored in float32
PER_STEP = 60e-6  # recording one step of a trace (its residents, accesses, code line)
PER_HEAD = {False: 500e-6, True: 700e-6}  # a head's own chip, first and last lines, reference (forward; backward)
STEP_BYTES = 600  # one recorded step in memory
TRACE_FILE_PARSED = 20  # bytes of memory per byte of a trace file read and parsed, at worst ("[]," is a 56-byte list)
STEPS_PER_PAIR = 6  # steps a listing records per tile pair (4 for flash2, 6 for flash1 and standard)
PER_SCORE = 14e-9  # the float64 reference, per score, plus PER_SCORE_D per score and head dimension
PER_SCORE_D = 0.2e-9
BACKWARD_PER_SCORE, BACKWARD_PER_SCORE_D = 15e-9, 0.8e-9  # ×2.5–2.8 (measured): the gradient bound's 7 magnitudes
PROCESS = 150 * 2**20  # Python, NumPy, rich and the command itself
PROCESS_SECONDS = 1.0  # starting a fresh flashsim process (`bench cli` measures 0.3–0.7 s)
CLOSED_FORM_PER_ROW_BLOCK = 5e-6  # seconds to add one row block into a closed form (a sweep's, summed per block)
RULE_ROW_BLOCK = 13e-6  # a step of iomodel.sums under a mask Rule (a row block, or a run of them): 800,000 in 10.5 s
CLOSED_FORM_SECONDS = 1e-3  # one closed form by `sim.machine.row_sums`: a few floor sums, whatever N
SMALL_TILE = 64  # Br × Bc below this: the blocks, more than N, make the tile pairs many
PER_CONFIGURATION = 200e-6  # a sweep's block search and kernel list for one configuration
PER_PREDICTED_STEP = 5e-6  # sim.machine's L2 play a forward block-step (a default sweep's N, A100/H100: 3.8–5.1 µs)
BACKWARD_PER_PREDICTED_STEP = 16e-6  # and a backward block-step (12.7–20.3 µs; `report.below_hbm` timed)
NUMPY_PER_FLOP = 30e-12  # a whole-matrix float32 matmul
BENCH_LIMIT_SECONDS = 600.0  # a benchmark is asked to take its time: it may run for 10 minutes
PER_SUBMISSION = 1.1  # seconds of one core to grade a submission of assignment 2 (README: 100 in 55 s, 2 at a time)
GRADING_CHILD = 64 * 2**20  # a submission's process: 33 MB at its peak for the masters of 1-4, doubled for a student's
TRAIN_TOKENS_PER_STEP = 32 * 256  # demo train: batch × seq (gpu.lab.train.TrainConfig)
# its three runs, H100 (gpu/lab/results/train-h100.json)
TRAIN_TOKENS_PER_S = {"flash": 1_038_440, "standard": 534_428, "sdpa": 1_405_009}


@dataclass(frozen=True)
class Estimate:
    """Seconds some work takes; the memory it holds to the end (`held`) and, on top, the most a phase of it holds
    for a while (`transient`: a phase's temporaries are gone before the next phase); the trace steps it records."""

    seconds: float = 0.0
    held: int = 0
    transient: int = 0
    steps: int = 0

    @property
    def bytes(self) -> int:
        """The peak: what is held, and the largest phase on top."""
        return self.held + self.transient

    def __add__(self, other: "Estimate") -> "Estimate":
        """Two phases, one after the other."""
        return Estimate(self.seconds + other.seconds, self.held + other.held,
                        max(self.transient, other.transient), self.steps + other.steps)  # fmt: skip

    def times(self, k: int) -> "Estimate":
        """The same work done k times, one after another (its memory held once)."""
        return Estimate(self.seconds * k, self.held, self.transient, self.steps)


def available_memory() -> int:
    """Bytes of memory this machine can give a new process now (MemAvailable on Linux, else all of it)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def closed_form(algorithm: str, N: int, Nk: int, d: int, s: int, Br: int, Bc: int, causal: bool, backward: bool):
    """One head's closed-form counts (O(1) in N: `sim.machine.row_sums`)."""
    counts = registry.backward_counts if backward else registry.counts
    return counts(algorithm, N, Nk, d, s, Br, Bc, causal)


def simulate(
    algorithm: str, *, n: int, nk: int, d: int, dtype: str, Br: int, Bc: int, causal: bool = False, heads: int = 1,
    backward: bool = False, record: bool = False,
) -> Estimate:  # fmt: skip
    """Running a listing through the chip for `heads` heads (its backward with `backward`; `record`: tracing one)."""
    s, entry = DTYPES[dtype].itemsize, get(algorithm)
    c = closed_form(algorithm, n, nk, d, s, Br, Bc, causal, backward)
    pairs = ceil(n / Br) * ceil(nk / Bc)
    per_head = pairs * PER_PAIR + c.flops * PER_FLOP + c.exps * PER_EXP + c.hbm_write_bytes / s * PER_WRITE[s]
    per_head += PER_HEAD[backward]  # flash1 at N = 16, d = 4 on a 2-core EPYC: 487 µs a head, 1,193 µs with --backward
    per_head += (n + 2 * nk) * d * (1 + backward) * PER_INPUT  # q, k, v (and dO, dQ, dK, dV): drawn, cast, mirrored
    rows = n * nk if "P" in entry.saves else 0  # the forward leaves P (N × Nk) in HBM: it holds S and P
    saved = sum(s * rows if name == "P" else F * n for name in entry.saves)
    held = heads * ((n + 2 * nk) * d * s + n * d * s + saved)  # q, k, v, O and what the forward saves, every head
    draw = heads * max(n, nk) * d * 8  # random inputs are drawn in float64, a tensor at a time
    # one head's HBM tensors and their float32 copies (O's copy too; O itself is held with the outputs)
    chip = (n + 2 * nk) * d * (s + F) + n * d * F + 2 * rows * (s + F)
    if backward:
        held += heads * (2 * n + 2 * nk) * d * s  # dO, dQ, dK, dV
        chip += (2 * n + 2 * nk) * d * (s + F) + rows * (s + F)  # and dP, dS beside P
    est = Estimate(heads * per_head, held, max(draw, chip))
    if record:
        steps = trace_steps(n, nk, Br, Bc)
        est += Estimate(steps * PER_STEP, steps * STEP_BYTES, 0, steps)
    return est


def listing(config: dict, *, backward: bool = False, record: bool = False) -> Estimate:
    """`simulate` for a pass's configuration (`sim.api.inputs.configure_shape`'s)."""
    return simulate(
        config["algorithm"], n=config["n"], nk=config["nk"], d=config["d"], dtype=config["dtype"],
        Br=config["block_rows"], Bc=config["block_cols"], causal=config["causal"], heads=config["heads"],
        backward=backward, record=record,
    )  # fmt: skip


def trace_steps(n: int, nk: int, Br: int, Bc: int) -> int:
    """About how many steps a listing records: a few per tile pair and per row or column block."""
    return STEPS_PER_PAIR * (ceil(n / Br) * ceil(nk / Bc) + ceil(n / Br) + ceil(nk / Bc))


def check(n: int, nk: int, d: int, heads: int = 1, backward: bool = False) -> Estimate:
    """The float64 reference of `heads` heads (and its gradients), a block of rows at a time."""
    per_score = PER_SCORE + PER_SCORE_D * d + (BACKWARD_PER_SCORE + BACKWARD_PER_SCORE_D * d if backward else 0)
    copies = (n + 2 * nk) * d + (2 * n + 2 * nk) * d * backward  # q, k, v (do, dq, dk, dv) in float64
    seconds = heads * (n * nk * per_score + copies * PER_INPUT)  # the scores, and the inputs' float64 copies
    return Estimate(seconds, 0, 8 * heads * copies + 3 * 8 * reference.BLOCK_ELEMENTS)


def decoding(nq: int, nk: int, d: int, dtype: str, Bc: int, splits: int) -> Estimate:
    """Flash-Decoding of one head through the chip (`sim.decode`), and its float64 reference."""
    s = DTYPES[dtype].itemsize
    pairs = ceil(nk / Bc) + splits
    seconds = pairs * PER_PAIR + 4 * nq * nk * d * PER_FLOP + nq * nk * PER_EXP
    held = (nq + 2 * nk) * d * s  # q, k, v as stored
    transient = max(nk * d * 8, (nq + 2 * nk) * d * (s + F))  # drawn in float64; the chip's copies
    return Estimate(seconds, held, transient) + check(nq, nk, d)


def sweeping(configurations: int, row_blocks: int, forward_steps: int = 0, backward_steps: int = 0) -> Estimate:
    """Closed forms only (`flashsim sweep`): a block search per configuration and a sum over its row blocks; and
    sim.machine's L2 played for each pass's block-steps (`sim.lab.sweep.predicted_steps`)."""
    return Estimate(configurations * PER_CONFIGURATION + row_blocks * CLOSED_FORM_PER_ROW_BLOCK
                    + forward_steps * PER_PREDICTED_STEP + backward_steps * BACKWARD_PER_PREDICTED_STEP)  # fmt: skip


def numpy_attention(n: int, d: int) -> Estimate:
    """Plain NumPy standard attention in float32 (`flashsim bench sim`'s baseline): S and P held whole."""
    return Estimate(4 * n * n * d * NUMPY_PER_FLOP + n * n * PER_EXP, 0, 2 * F * n * n + 3 * n * d * F)


def grading(submissions: int, jobs: int) -> Estimate:
    """Grading `submissions` of assignment 2, `jobs` at a time on this machine's cores, a process each."""
    parallel = max(1, min(jobs, submissions, os.cpu_count() or 1))
    return Estimate(ceil(submissions / parallel) * PER_SUBMISSION, min(jobs, submissions) * GRADING_CHILD)


def training(steps: int) -> Estimate:
    """`flashsim demo train`: `steps` steps of each run at the recorded H100 run's pace (its memory: that GPU's)."""
    return Estimate(steps * sum(TRAIN_TOKENS_PER_STEP / rate for rate in TRAIN_TOKENS_PER_S.values()))


def process() -> Estimate:
    """What the command holds before any work."""
    return Estimate(0.0, PROCESS)  # held: the interpreter and its modules


def limit_seconds(default: float = LIMIT_SECONDS) -> float:
    """The longest work a command starts: `default`, or FLASHSIM_MAX_SECONDS where it is set (a positive number of
    seconds; "inf" lifts the limit)."""
    text = os.environ.get("FLASHSIM_MAX_SECONDS")
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = nan
    if not seconds > 0:  # refuses NaN too
        raise InputError(f"FLASHSIM_MAX_SECONDS: {text!r} is not a positive number of seconds (e.g. 60, or inf)")
    return seconds


def refuse(est: Estimate, option: str, what: str, instead: str, limit: float = LIMIT_SECONDS) -> None:
    """Raise a one-line InputError naming `option` if `est` would not fit in memory or would take over the limit."""
    free, limit = available_memory(), limit_seconds(limit)
    over = []
    if est.seconds > limit:
        over.append(f"about {duration(est.seconds)} (the limit is {duration(limit)}, FLASHSIM_MAX_SECONDS)")
    if est.bytes > free:
        over.append(f"about {human_bytes(est.bytes)} of memory ({human_bytes(free)} is free)")
    if est.steps > MAX_TRACE_STEPS:
        over.append(f"about {count(est.steps)} steps (a trace holds {count(MAX_TRACE_STEPS)})")
    if over:
        raise InputError(f"{option}: {what} would take {' and '.join(over)}; try {instead}")


def largest(fits, hi: int) -> int:
    """A large x in 1 … hi with fits(x), or 0 if none: doubling from 1 while it fits, then halving the gap. fits
    falls as x grows, but not strictly (blocks change with N), so the search starts from 1, not from hi: the answer
    is the same whatever hi, and fits(answer) holds."""
    if not fits(1):
        return 0
    lo = 1
    while 2 * lo <= hi and fits(2 * lo):
        lo *= 2
    hi = min(hi, 2 * lo - 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def within(est: Estimate, limit: float = LIMIT_SECONDS) -> bool:
    """Whether `refuse` lets `est` through."""
    return est.seconds <= limit_seconds(limit) and est.bytes <= available_memory() and est.steps <= MAX_TRACE_STEPS


def tiles(config: dict) -> str:
    """`4,096 tile pairs of 128 × 128` (a configuration's blocks)."""
    n, nk, Br, Bc = config["n"], config["nk"], config["block_rows"], config["block_cols"]
    pairs = ceil(n / Br) * ceil(nk / Bc)
    return f"{count(pairs)} tile pair{'s' * (pairs != 1)} of {Br} × {Bc}"


def shape_of(config: dict) -> str:
    """`N = 4,096, Nk = 4,096, d = 64, 16 heads`."""
    heads = f", {count(config['heads'])} heads" if config["heads"] > 1 else ""
    return f"N = {count(config['n'])}, Nk = {count(config['nk'])}, d = {config['d']}{heads}"


def counting(rule_row_blocks: int = 0) -> Estimate:
    """Evaluating a closed form (`--counts-only`): O(1) in N (`sim.machine.row_sums`), nothing held; plus the row
    steps of those that a mask Rule makes walk (`sim.cli.variants.row_blocks`)."""
    return Estimate(CLOSED_FORM_SECONDS + rule_row_blocks * RULE_ROW_BLOCK)


def guard(
    ctx: click.Context, cost, what: str, hints: list[str], small_blocks: bool = False, limit: float = LIMIT_SECONDS,
    option: str | None = None, **sizes,
) -> None:  # fmt: skip
    """Refuse, in one line naming the culprit option (`option`, else `culprit`'s), work whose `cost(**sizes)` is over
    the limits; the hints say what to try, the last the largest value of that option that would do."""
    est = cost(**sizes)
    if within(est, limit):
        return
    option = option or culprit(ctx, small_blocks)
    name = next((p.name for p in ctx.command.params if option in p.opts), None)
    if isinstance(sizes.get(name), int) and sizes[name] > 1:

        def fits(x: int) -> bool:
            try:
                return within(cost(**(sizes | {name: x})), limit)
            except InputError:  # e.g. blocks that no longer fit the SRAM
                return False

        best = largest(fits, sizes[name] - 1)
        if best:
            hints = [*hints, f"{option} {best} or less"]  # as typed back: no thousands separators
    refuse(est, option, what, " or ".join(hints) or "smaller sizes", limit)


def culprit(ctx: click.Context, small_blocks: bool) -> str:
    """The option to name in a refusal: with small blocks, the block or SRAM option given; else the size option given
    above 1 largest against its default; else --seqlens, --hardware (given, or for small blocks), or its own size."""
    given = typed(ctx)
    if small_blocks:
        for name in ("block_rows", "block_cols", "sram_bytes", "hardware_name", "blocks"):
            if name in given:
                return given[name].opts[0]
    sizes = [
        (ctx.params[name] / (given[name].default or 1), given[name].opts[0])
        for name in ("n", "nk", "batch", "heads", "d", "queries", "memory_n", "repeats", "keys", "steps", "devices")
        if name in given and isinstance(ctx.params[name], int) and ctx.params[name] > 1  # 1: no smaller to try
    ]
    if sizes:
        return max(sizes)[1]
    named = [given[name].opts[0] for name in ("seqlens", "hardware_name") if name in given]  # no size typed: these
    own = {p.name: p.opts[0] for p in ctx.command.params}  # --n; decode's --nk, demo train's --steps, fig2's --hardware
    named += ["--hardware"] * small_blocks + [own[k] for k in ("n", "ns", "nk", "steps", "hardware_name") if k in own]
    return named[0]
