"""The traces the viewer shows: recorded from a run (forward or backward) or loaded from a file."""

from pathlib import Path

import numpy as np

from sim import reference
from sim.api import backward, run
from sim.errors import InputError
from sim.trace import Trace
from sim.viz.timeline import Timeline

SMALL = 16  # runs with N, Nk and d all at most this record every value; bigger ones only one row's, with `row`


def _mode(q, k, row: int | None) -> str:
    """What a trace records: every value of a small run, one row's with `row`, else steps only."""
    return "values" if row is not None or max(q.shape[0], k.shape[0], q.shape[1]) <= SMALL else "steps"


def record(algorithm: str, q, k, v, *, row: int | None = None, **options) -> Trace:
    """Run `algorithm` and keep its trace: every value for small runs, one query row's with `row`, else none."""
    return run(algorithm, q, k, v, record=_mode(q, k, row), row=row, **options).trace


def record_backward(algorithm: str, q, k, v, *, row: int | None = None, **options) -> Trace:
    """The backward pass's trace, as `record`; O and L from the float64 reference, dO seeded random."""
    o, lse = reference.attention(q, k, v, causal=options.get("causal", False), scale=options.get("scale"))
    do = np.random.default_rng(1).standard_normal(q.shape).astype(q.dtype)
    return backward(algorithm, q, k, v, o.astype(q.dtype), lse, do, record=_mode(q, k, row), row=row, **options).trace


def load(path: str | Path, row: int | None = None) -> Trace:
    """A trace saved with `Trace.save`, cut down to one query row's values with `row`."""
    trace = Trace.load(path)
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
