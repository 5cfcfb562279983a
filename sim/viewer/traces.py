"""The traces the viewer shows: recorded from a run (forward or backward) or loaded from a file."""

import json
from pathlib import Path

import numpy as np

from sim.api.entry import backward, run
from sim.api.inputs import check_logits, check_scale
from sim.api.varlen import run_varlen
from sim.core.atomic_file import read_regular
from sim.core.errors import InputError
from sim.core.format import human_bytes
from sim.machine.trace import Trace
from sim.viewer import schema
from sim.viz.timeline import Timeline

MAX_FILE = 2**40  # bytes of a trace file read where no memory limit is given (a machine's own memory stops it first)
SMALL = 16  # runs with N, Nk and d all at most this record every value; bigger ones one query row's (row 0's)


def _row(q, k, row: int | None) -> int | None:
    """The query row whose values a trace keeps: `row`, or row 0 for a run too big to keep every value (None)."""
    return 0 if row is None and max(q.shape[-2], k.shape[-2], q.shape[-1]) > SMALL else row


def record(algorithm: str, q, k, v, *, row: int | None = None, **options) -> Trace:
    """Run `algorithm` and keep its trace with values: every value for small runs, one query row's for big ones
    (`row`, or row 0)."""
    return run(algorithm, q, k, v, record="values", row=_row(q, k, row), **options).trace


def record_backward(algorithm: str, q, k, v, *, row: int | None = None, **options) -> Trace:
    """The backward pass's trace, as `record`: after the simulated forward (its O and its float32 L, as `run
    --backward` takes them: the float64 reference's L made P overflow at |τ| = 10²⁰, red team 92), dO seeded."""
    check_logits(q, k, check_scale(options.get("scale"), q.shape[-1]))
    forward = run(algorithm, q, k, v, **options)
    do = np.random.default_rng(1).standard_normal(q.shape).astype(q.dtype)
    chip = {
        key: options[key] for key in ("block_rows", "block_cols", "blocks", "sram_bytes", "hardware") if key in options
    }
    return backward(forward, do, record="values", row=_row(q, k, row), **chip).trace


def record_varlen(algorithm: str, q, k, v, cu_seqlens, *, row: int | None = None, **options) -> Trace:
    """A packed batch's trace (`sim.run_varlen`, the same lengths for queries and keys): its first sequence's first
    program, with values as `record` keeps them."""
    row = _row_of_first(q, cu_seqlens, row)
    return run_varlen(algorithm, q, k, v, cu_seqlens, cu_seqlens, record="values", row=row, **options).trace


def record_varlen_backward(algorithm: str, q, k, v, cu_seqlens, *, row: int | None = None, **options) -> Trace:
    """The backward of a packed batch (`sim.backward(packed, do)`, dO seeded random), traced as `record_varlen`."""
    packed = run_varlen(algorithm, q, k, v, cu_seqlens, cu_seqlens, **options)
    do = np.random.default_rng(1).standard_normal(q.shape).astype(q.dtype)
    return backward(packed, do, record="values", row=_row_of_first(q, cu_seqlens, row)).trace


def _row_of_first(q, cu_seqlens, row: int | None) -> int | None:
    """`_row` for the first sequence of a packed q (total, H, d)."""
    return 0 if row is None and max(int(cu_seqlens[1]), q.shape[-1]) > SMALL else row


def load(path: str | Path, row: int | None = None, max_bytes: int | None = None) -> Trace:
    """A trace saved with `Trace.save`, cut down to one query row's values with `row`; refused in one line where
    the file holds more than `max_bytes`, nests deeper than Python's JSON parser goes, or holds something other
    than numbers where a step's values, the inputs or the output go."""
    if not str(path):
        raise InputError("trace: an empty file name")
    d = _read(path, max_bytes)
    schema.check(d)
    trace = Trace.from_dict(d)
    _check_numbers(trace)
    _check_names(trace)
    if row is None:
        return trace
    n = trace.config["n"]
    if not 0 <= row < n:
        raise InputError(f"row: {row} is outside the matrix; query rows are 0 … {n - 1} (N = {n})")
    return trace.only_row(row)


def check_step(timeline: Timeline, k: int | None) -> None:
    """Refuse a step number the trace does not have."""
    if k is not None and not 0 <= k < len(timeline):
        raise InputError(f"step: {k} is out of range; this trace has steps 0 … {len(timeline) - 1}")


def _read(path: str | Path, max_bytes: int | None) -> dict:
    """The JSON in the regular file at `path` (never a device such as /dev/zero, which never ends, nor a pipe, which
    blocks), read as bytes, at most `max_bytes`."""
    most = MAX_FILE if max_bytes is None else max_bytes
    data = read_regular(path, most, "trace", f"({human_bytes(most)}) more than this machine's free memory holds once "
                        "it is read; open it where more memory is free")  # fmt: skip
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"trace: {str(path)!r} is not valid JSON ({e})") from None
    except RecursionError:
        raise InputError(f"trace: {str(path)!r} nests its JSON deeper than any trace does") from None


def _check_numbers(trace: Trace) -> None:
    """Refuse a trace whose step values, inputs or output are not numbers: a number, a vector or a matrix of them."""
    named = [(f"step {s.index} {when} {name}", v) for s in trace.steps for when, bufs in (s.values or {}).items()
             for name, v in _typed_dict(bufs, f"step {s.index} {when}").items()]  # fmt: skip
    named += [(f"input {name}", v) for name, v in _typed_dict(trace.inputs or {}, "inputs").items()]
    named += [("output", trace.output)] if trace.output is not None else []
    for where, value in named:
        rows = value if isinstance(value, list) and value and all(isinstance(r, list) for r in value) else [value]
        bad = [x for row in rows for x in (row if isinstance(row, list) else [row]) if not _number(x)]
        if bad:
            raise InputError(f"trace: malformed trace: {where} holds {str(bad[0])[:40]!r} where a number goes")


def _check_names(trace: Trace) -> None:
    """Refuse a trace whose step phases, SRAM buffers' names or tiles' levels are not text (the listing joins them)."""
    for s in trace.steps:
        tiles = [*s.reads, *s.writes, *(r.source for r in s.sram if r.source is not None)]
        named = [("phase", s.phase)] * (s.phase is not None) + [("SRAM buffer", r.name) for r in s.sram]
        for what, value in named + [("tile level", a.level) for a in tiles]:
            if not isinstance(value, str):
                raise InputError(f"trace: malformed trace: step {s.index}'s {what} is {str(value)[:40]!r}, not text")


def _typed_dict(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"trace: malformed trace: {where} is {str(value)[:60]}, expected a dict")
    return value


def _number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)
