"""The memory hierarchy: HBM tensors, a capacity-checked SRAM, and the Chip that books every transfer in its Ledger.

Algorithms touch data only through a `Chip`: `load` copies a tile HBM → SRAM, `put`
keeps an on-chip result in SRAM, `store` writes a tile SRAM → HBM, and `matmul`/`exp`
compute (and count) on SRAM-resident buffers. Every byte that crosses HBM is booked.
"""

import sys
from contextlib import nullcontext

import numpy as np

from sim.core.dtypes import ACCUMULATOR
from sim.core.errors import InputError, SRAMOverflowError
from sim.core.format import human_bytes
from sim.machine.ledger import Ledger
from sim.machine.storage_cast import write_rounded
from sim.machine.trace import KEY_TENSORS, Access, Resident, Step, Trace, row_values

MAX_TRACE_STEPS = 250_000  # a recorded trace holds at most this many steps (about 150 MB of Python objects)


class HBM:
    """Off-chip memory: named tensors, each in its storage dtype.

    Beside each tensor HBM keeps a float32 copy, updated on every write, so that reading a
    tile costs NumPy no conversion (every storage dtype converts to float32 exactly). It is
    how the simulator computes, not something the GPU has: bytes are booked at storage size.
    """

    def __init__(self):
        self.tensors: dict[str, np.ndarray] = {}
        self._f32: dict[str, np.ndarray] = {}
        self.destinations: dict[str, np.ndarray] = {}  # arrays an output tensor may be allocated in (no copy after)

    def place(self, name: str, array: np.ndarray) -> None:
        """Put a tensor in HBM without booking traffic (inputs are there before the kernel starts)."""
        self.tensors[name] = array
        self._f32.pop(name, None)

    def alloc(self, name: str, shape: tuple, dtype) -> None:
        """Reserve an uninitialized output tensor (NaN-filled, so a missed write shows), and its float32 copy; in its
        destination where one of its shape and dtype is given."""
        out = self.destinations.get(name)
        if out is None or out.shape != tuple(shape) or out.dtype != np.dtype(dtype):
            out = np.empty(shape, dtype=dtype)
        out.fill(np.nan)
        self.place(name, out)
        if np.dtype(dtype) != ACCUMULATOR:  # kept up to date by every write, so that no read converts it whole
            self._f32[name] = np.full(shape, np.nan, dtype=ACCUMULATOR)

    def read(self, name: str, rows, cols, level: str) -> tuple[np.ndarray, Access]:
        """A float32 copy of a tile, and the transfer that brought it on chip."""
        if name not in self._f32:
            src = self.tensors[name]
            self._f32[name] = src if src.dtype == ACCUMULATOR else src.astype(ACCUMULATOR)
        mirror = self._f32[name]
        tile = mirror[_index(rows, cols, mirror.ndim)].copy()
        return tile, _access(self.tensors[name], name, rows, cols, tile.size, level)

    def write(self, name: str, value: np.ndarray, rows, cols) -> Access:
        """Round `value` to the tensor's storage dtype and write it to a tile; returns the transfer."""
        dst = self.tensors[name]
        index = _index(rows, cols, dst.ndim)
        mirror = self._f32.get(name)
        write_rounded(value, dst[index], None if mirror is None or mirror is dst else mirror[index])
        return _access(dst, name, rows, cols, value.size, "hbm")


class SRAM:
    """On-chip memory of `capacity` bytes holding named buffers; going over raises SRAMOverflowError."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.buffers: dict[str, tuple[np.ndarray, int, Access | None]] = {}  # name -> (array, nbytes, source)
        self._ids: dict[int, int] = {}  # id() of each resident array -> under how many names, for `holds`
        self.used = 0
        self.peak = 0

    def put(self, name: str, array: np.ndarray, nbytes: int, source: Access | None = None, replaces=()) -> None:
        """Make `name` resident (replacing a buffer of the same name, and those in `replaces`)."""
        self.free(name, *replaces)
        if self.used + nbytes > self.capacity:
            resident = ", ".join(f"{n} {human_bytes(b)}" for n, (_, b, _) in self.buffers.items()) or "nothing"
            raise SRAMOverflowError(
                f"SRAM overflow: {name} ({human_bytes(nbytes)}) does not fit; resident: {resident} "
                f"= {self.used:,} B of {self.capacity:,} B ({human_bytes(self.capacity)}) "
                "(use smaller blocks, or more SRAM with --sram-bytes or --hardware)"
            )
        self.buffers[name] = (array, nbytes, source)
        self._ids[id(array)] = self._ids.get(id(array), 0) + 1
        self.used += nbytes
        self.peak = max(self.peak, self.used)

    def free(self, *names: str) -> None:
        """Release buffers (names not resident are ignored)."""
        for name in names:
            entry = self.buffers.pop(name, None)
            if entry is not None:
                key = id(entry[0])
                if self._ids[key] == 1:
                    del self._ids[key]
                else:
                    self._ids[key] -= 1
                self.used -= entry[1]

    def holds(self, x: np.ndarray) -> bool:
        """Whether `x` is a resident buffer or a view of one."""
        return id(x) in self._ids or (x.base is not None and id(x.base) in self._ids)

    def residents(self) -> list[Resident]:
        """The buffers in SRAM now."""
        return [Resident(n, b, src) for n, (_, b, src) in self.buffers.items()]


class Chip:
    """One thread block's view of the GPU: HBM, its SRAM, the ledger and (optionally) a step trace.

    `record` is "counts" (ledger only), "steps" (plus a Trace of every step) or
    "values" (steps plus the values each step wrote to SRAM); with `row`, the values
    of that query row only (`sim.machine.trace.row_values`), so that big runs stay small.
    """

    def __init__(self, sram_bytes: int, record: str = "counts", trace: Trace | None = None, row: int | None = None):
        self.hbm = HBM()
        self.sram = SRAM(sram_bytes)
        self.ledger = Ledger()
        self.record = record
        self.trace = trace
        self.row = row
        if trace is not None:
            trace.row = row if record == "values" else None
        self._step: Step | None = None

    # -- tracing --------------------------------------------------------------

    def step(self, op: str, line: int | None, text: str, i: int | None = None, j: int | None = None, phase=None):
        """Context for one executed line of the paper's listing (a no-op unless recording).

        The step records the paper's `line` and where in the Python listing it was called from.
        """
        if self.trace is None:
            return nullcontext()
        if len(self.trace.steps) >= MAX_TRACE_STEPS:
            raise InputError(
                f"trace: the run has more than {MAX_TRACE_STEPS:,} steps, too many to record; "
                "use bigger blocks or more SRAM (a bigger hardware preset)"
            )

        from sim.machine import source  # here: a graded child never records a trace, and never loads it

        caller = sys._getframe(1)
        code = (source.relative(caller.f_code.co_filename), caller.f_lineno)
        return _StepContext(self, Step(len(self.trace.steps), op, line, text, i, j, phase, code=code))

    def _note(self, name: str, before, after) -> None:
        """Keep a buffer's value before (its first, within a step) and after an update, for record="values"."""
        if self.record == "values" and self._step is not None:
            values = self._step.values
            if before is not None and name not in values["before"] and name not in values["after"]:
                values["before"][name] = before
            values["after"][name] = after

    # -- data movement ----------------------------------------------------------

    def load(self, buf: str, tensor: str, rows=None, cols=None, *, cached: bool = False) -> np.ndarray:
        """Copy a tile of an HBM tensor into SRAM buffer `buf`; returns it as float32.

        The buffer occupies SRAM at the storage dtype's size; the float32 copy is only how
        NumPy computes on it (a tensor core multiplies fp16/bf16 exactly into float32).
        `cached=True` books the read at level "l2": a re-read that Theorem 2's count of
        standard attention assumes never reaches HBM.
        """
        value, access = self.hbm.read(tensor, rows, cols, "l2" if cached else "hbm")
        self.ledger.book(access.level, tensor, "read", access.nbytes)
        if self._step is not None:
            self._note(buf, self._current(buf), value)
        self.sram.put(buf, value, access.nbytes, access)
        if self._step is not None:
            self._step.reads.append(access)
        return value

    def put(self, buf: str, value, replaces=()) -> np.ndarray:
        """Keep an on-chip result in SRAM as float32 (replacing `replaces`, as an in-place update)."""
        value = np.asarray(value, dtype=ACCUMULATOR)
        if self._step is not None:
            self._note(buf, self._current(buf), value)
        self.sram.put(buf, value, value.nbytes, None, replaces)
        return value

    def store(self, tensor: str, value: np.ndarray, rows=None, cols=None) -> None:
        """Write an SRAM buffer to a tile of an HBM tensor, rounding to its storage dtype."""
        assert self.sram.holds(value), "store: only SRAM-resident buffers can be written to HBM"
        access = self.hbm.write(tensor, value, rows, cols)
        self.ledger.book("hbm", tensor, "write", access.nbytes)
        if self._step is not None:
            self._step.writes.append(access)

    def free(self, *bufs: str) -> None:
        """Release SRAM buffers."""
        self.sram.free(*bufs)

    def _current(self, buf: str):
        entry = self.sram.buffers.get(buf)
        return None if entry is None else entry[0]

    # -- arithmetic ---------------------------------------------------------------

    def matmul(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """A @ B on SRAM-resident operands, booking 2·m·n·k FLOPs."""
        assert self.sram.holds(A) and self.sram.holds(B), "matmul: operands must be resident in SRAM"
        (m, k), n = A.shape, B.shape[1]
        self.ledger.work["matmul"] += 2 * m * n * k
        return A @ B

    def exp(self, x: np.ndarray) -> np.ndarray:
        """Elementwise exp (`rounded_exp`), booking one evaluation per element."""
        self.ledger.work["exp"] += x.size
        return rounded_exp(x)

    def elementwise(self, n: int) -> None:
        """Book `n` elementwise operations: non-matmul arithmetic other than exp (see `sim.machine.iomodel`)."""
        self.ledger.work["elementwise"] += n


def rounded_exp(x) -> np.ndarray:
    """e^x rounded once to x's float32 (or float16): through float64, within half an ulp of it, as the bounds'
    "each exp within one ulp" takes (`sim.api.tolerance`, step 1). NumPy's own float32 exp errs by up to 2.4 ulps
    (3.4w relative: NumPy 2.4 on an AVX-512 CPU, helper 114), past it; other dtypes as NumPy computes them."""
    x = np.asarray(x)
    if x.dtype.kind == "f" and x.dtype.itemsize < 8:
        return np.exp(x.astype(np.float64)).astype(x.dtype)
    return np.exp(x)


class _StepContext:
    """Opens a Step on entry; on exit snapshots SRAM, the running totals and the query rows into it."""

    __slots__ = ("chip", "sources", "step")

    def __init__(self, chip: Chip, step: Step):
        self.chip, self.step = chip, step

    def __enter__(self):
        if self.chip.record == "values":
            self.step.values = {"before": {}, "after": {}}
        self.sources = [src for _, _, src in self.chip.sram.buffers.values() if src is not None]
        self.chip._step = self.step
        return self.step

    def __exit__(self, *exc):
        chip, step = self.chip, self.step
        chip._step = None
        step.sram = chip.sram.residents()
        step.sram_bytes = chip.sram.used
        step.hbm_read_bytes = chip.ledger.hbm_read_bytes
        step.hbm_write_bytes = chip.ledger.hbm_write_bytes
        step.flops = chip.ledger.flops
        step.rows = _query_rows(step, self.sources)
        if step.values is not None:
            values = step.values if chip.row is None else row_values(step.values, step.rows, chip.row)
            step.values = values and {when: {n: a.tolist() for n, a in bufs.items()} for when, bufs in values.items()}
        chip.trace.steps.append(step)
        return False


def _query_rows(step: Step, sources_before: list[Access]) -> tuple[int, int] | None:
    """The query rows of the first query-indexed tile the step moved or had in SRAM (before or after it)."""
    residents = [r.source for r in step.sram if r.source is not None]
    for a in (*step.reads, *step.writes, *residents, *sources_before):
        if a.tensor not in KEY_TENSORS:
            return a.r0, a.r1
    return None


def _index(rows, cols, ndim: int):
    r = slice(*rows) if rows is not None else slice(None)
    if ndim == 1:
        return r
    return r, (slice(*cols) if cols is not None else slice(None))


def _access(src: np.ndarray, tensor: str, rows, cols, size: int, level: str) -> Access:
    r0, r1 = rows if rows is not None else (0, src.shape[0])
    c0, c1 = (cols if cols is not None else (0, src.shape[1])) if src.ndim == 2 else (0, 1)
    return Access(tensor, r0, r1, c0, c1, size * src.itemsize, level)
