"""A trace prepared for replay: running totals, tile geometry and closed-form totals, each looked up at once."""

import re
from bisect import bisect_right
from math import ceil

import numpy as np

from sim.algorithms import iomodel_variants, registry
from sim.algorithms.registry import REGISTRY
from sim.core.dtypes import DTYPES
from sim.core.errors import InputError
from sim.machine import hardware, iomodel, launch, prediction
from sim.machine.trace import KEY_TENSORS, Access, Step, Trace

SCORE_TENSORS = frozenset({"S", "P", "dS", "dP"})  # N × Nk: tiled by Br rows and Bc columns


UNSET = object()  # not worked out yet
EMPTY, RESIDENT, READ, WRITTEN = range(4)  # a tile's state at a step; a higher state wins when cells merge


class Timeline:
    """Replays a trace: per-tensor bytes so far, SRAM peak so far, tile states and buffer values at any step."""

    def __init__(self, trace: Trace):
        if not trace.steps:
            raise InputError("trace: it has no steps")
        self.trace = trace
        self.steps = trace.steps
        c = trace.config
        self.n, self.nk, self.d = c["n"], c["nk"], c["d"]
        self.block_rows, self.block_cols = c["block_rows"], c["block_cols"]
        self.sram_capacity = c["sram_bytes"]
        if c["dtype"] not in DTYPES:
            raise InputError(f"trace: dtype {c['dtype']!r} is unknown; flashsim stores {', '.join(DTYPES)}")
        self.itemsize = DTYPES[c["dtype"]].itemsize
        self.tensors = list(trace.hbm)
        self._traffic = self._running_traffic()
        self._peak = np.maximum.accumulate(np.array([s.sram_bytes for s in self.steps], dtype=np.int64))
        self._groups, self._group_of = _tile_groups(self.steps)
        self._history: dict[str, list[int]] | None = None
        self.has_values = any(s.values for s in self.steps)  # whether any step recorded values
        self._prediction = UNSET  # sim.machine's, worked out when a screen first asks

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def base(self) -> str:
        """The algorithm without " backward"."""
        return self.trace.algorithm.removesuffix(" backward")

    @property
    def is_backward(self) -> bool:
        """Whether the trace is of a backward pass."""
        return self.trace.algorithm.endswith(" backward")

    @property
    def algorithm_name(self) -> str:
        """How the paper calls the algorithm: `FlashAttention-2`, `FlashAttention backward`."""
        name = title(self.base)
        return f"{name} backward" if self.is_backward else name

    @property
    def listing(self) -> str:
        """`Algorithm 1`: the paper's listing the steps' line numbers refer to."""
        if "sequence" in self.trace.config:  # one device of a ring: the steps are FlashAttention-2's listing's
            return "FlashAttention-2's Algorithm 1"
        entry = REGISTRY.get(self.base)
        paper = entry and (entry.backward_paper if self.is_backward else entry.paper)
        found = re.search(
            r"Algorithm \d+", paper or ""
        )  # the first the registry names: "Algorithm 1 (with dropout: …)"
        return found.group() if found else "the listing"

    def _running_traffic(self) -> dict[str, np.ndarray]:
        """{tensor: (steps, 3) running bytes of HBM reads, HBM writes and L2 re-reads}."""
        per: dict[str, np.ndarray] = {}
        for k, step in enumerate(self.steps):
            for a, column in [(a, 0 if a.level == "hbm" else 2) for a in step.reads] + [(a, 1) for a in step.writes]:
                if a.tensor not in per:
                    per[a.tensor] = np.zeros((len(self.steps), 3), dtype=np.int64)
                per[a.tensor][k, column] += a.nbytes
        return {t: np.cumsum(per[t], axis=0) for t in sorted(per, key=self._order)}

    def _order(self, tensor: str) -> tuple[int, str]:
        return (self.tensors.index(tensor) if tensor in self.tensors else len(self.tensors), tensor)

    def traffic(self, k: int) -> dict[str, tuple[int, int, int]]:
        """{tensor: (HBM bytes read, HBM bytes written, L2 bytes re-read)} after step k."""
        return {t: tuple(int(x) for x in a[k]) for t, a in self._traffic.items()}

    def peak(self, k: int) -> int:
        """The most SRAM bytes in use after any step up to k."""
        return int(self._peak[k])

    def closed_form(self, algorithm: str | None = None) -> iomodel.Counts:
        """The closed-form counts of the whole run (one head), or of another algorithm with the same blocks; a trace
        that carries its own (one device of a ring, `sim.machine.ring_model`) gives that."""
        c = self.trace.config
        if algorithm is None and "closed_form" in c:
            return iomodel.Counts(**c["closed_form"])
        if algorithm is None and self.variant:  # the program traced, as its variant counts it (red team 95: 400%)
            heads = c.get("query_heads")
            kernels = iomodel_variants.program(
                self.base, self.n, self.nk, self.d, self.itemsize, self.block_rows, self.block_cols,
                causal=bool(c.get("causal")), window=c.get("window"), softcap=c.get("softcap") is not None,
                alibi=bool(c.get("alibi")), group=heads[1] - heads[0] + 1 if heads else 1, backward=self.is_backward,
            )  # fmt: skip
            return iomodel.sum_counts(k for _, k in kernels)
        count = registry.backward_counts if self.is_backward else registry.counts
        shape = (self.n, self.nk, self.d, self.itemsize, self.block_rows, self.block_cols)
        return count(algorithm or self.base, *shape, bool(self.trace.config.get("causal")))

    @property
    def variant(self) -> bool:
        """Whether the trace is of a variant's program: a window, softcap, ALiBi or GQA's packed rows."""
        return any(self.trace.config.get(name) is not None for name in ("window", "softcap", "alibi", "query_heads"))

    def prediction(self):
        """Below HBM for the whole run (one head) on the trace's hardware, as `flashsim run` shows it: DRAM bytes
        and the time with its bound (`sim.machine.prediction`); None where the model has no grid for the run (a
        ring's device, an algorithm it does not cover) or the trace names no hardware."""
        if self._prediction is UNSET:
            self._prediction = self._predict()
        return self._prediction

    def _predict(self):
        c = self.trace.config
        if "sequence" in c or c.get("hardware") not in hardware.PRESETS:
            return None
        if self.variant:
            return None  # the model's grids are the plain programs' (red team 95: a window's was timed as none)
        if not prediction.affordable(self.n, self.nk, self.block_rows, self.block_cols, 1):
            return None
        hw = hardware.PRESETS[c["hardware"]]
        try:
            shape = (self.n, self.nk, self.d, self.itemsize, self.block_rows, self.block_cols, bool(c.get("causal")))
            return prediction.predict(self.base, *shape, 1, hw, launch.generic(self.peak(len(self) - 1), hw, c["dtype"]),
                                      backward=self.is_backward)  # fmt: skip
        except InputError:  # no grid for this algorithm, or a block no SM holds
            return None

    def contrast(self) -> tuple[str, iomodel.Counts]:
        """The other side of the comparison, same shape: standard attention (for standard, FlashAttention-2); for
        one device of a ring, FlashAttention-2 of the whole sequence on one device."""
        if "sequence" in self.trace.config:
            N, c = self.trace.config["sequence"], self.trace.config
            whole = registry.counts("flash2", N, N, self.d, self.itemsize, c["block_rows"], c["block_cols"],
                                   bool(c.get("causal")))  # fmt: skip
            return "FlashAttention-2 on one device", whole
        other = "flash2" if self.base == "standard" else "standard"
        name = title(other) + (" backward" if self.is_backward else "")
        return name, self.closed_form(other)

    # -- tiles ----------------------------------------------------------------------

    def grid_shape(self, tensor: str) -> tuple[int, int]:
        """Tiles of an HBM tensor: (row blocks, column blocks)."""
        rows = self.trace.hbm[tensor]["shape"][0]
        block = self.block_cols if tensor in KEY_TENSORS else self.block_rows
        cols = ceil(self.nk / self.block_cols) if tensor in SCORE_TENSORS else 1
        return ceil(rows / block), cols

    def tile_span(self, tensor: str, a: Access) -> tuple[range, range]:
        """The tiles of `tensor` an access overlaps: (tile rows, tile columns)."""
        block = self.block_cols if tensor in KEY_TENSORS else self.block_rows
        rows = range(a.r0 // block, (max(a.r1, a.r0 + 1) - 1) // block + 1)
        if tensor not in SCORE_TENSORS:
            return rows, range(1)
        return rows, range(a.c0 // self.block_cols, (max(a.c1, a.c0 + 1) - 1) // self.block_cols + 1)

    def tile_states(self, k: int, tensor: str, max_rows: int, max_cols: int) -> tuple[np.ndarray, int, int]:
        """The tensor's tiles at step k as a grid of EMPTY/RESIDENT/READ/WRITTEN, tiles merged into cells
        so that the grid has at most max_rows × max_cols cells; returns (grid, tiles per cell row, per cell column)."""
        tr, tc = self.grid_shape(tensor)
        gr, gc = ceil(tr / max(1, max_rows)), ceil(tc / max(1, max_cols))
        grid = np.zeros((ceil(tr / gr), ceil(tc / gc)), dtype=np.int8)
        step = self.steps[k]
        marks = [(r.source, RESIDENT) for r in step.sram if r.source is not None]
        marks += [(a, READ) for a in step.reads] + [(a, WRITTEN) for a in step.writes]
        for a, state in marks:
            if a.tensor != tensor:
                continue
            rows, cols = self.tile_span(tensor, a)
            cell = grid[rows.start // gr : (rows.stop - 1) // gr + 1, cols.start // gc : (cols.stop - 1) // gc + 1]
            np.maximum(cell, state, out=cell)
        return grid, gr, gc

    # -- moving around ----------------------------------------------------------------

    def tile_groups(self) -> list[tuple[int, int]]:
        """(first, last) step of each run of consecutive steps on one tile pair (phase, i, j)."""
        return self._groups

    def next_tile(self, k: int) -> int:
        """The first step of the next tile pair (the last step if there is none)."""
        g = self._group_of[k]
        return self._groups[g + 1][0] if g + 1 < len(self._groups) else len(self.steps) - 1

    def previous_tile(self, k: int) -> int:
        """The first step of the previous tile pair (step 0 if there is none)."""
        g = self._group_of[k]
        return self._groups[g - 1][0] if g > 0 else 0

    # -- values ---------------------------------------------------------------------

    def value(self, name: str, k: int):
        """The latest recorded value of SRAM buffer `name` after a step up to k, or None."""
        if self._history is None:
            self._history = {}
            for m, step in enumerate(self.steps):
                for buf in (step.values or {}).get("after", {}):
                    self._history.setdefault(buf, []).append(m)
        seen = self._history.get(name, [])
        at = bisect_right(seen, k)
        return self.steps[seen[at - 1]].values["after"][name] if at else None


def title(algorithm: str) -> str:
    """How a table heads an algorithm (the registry's title): `FlashAttention-2`; its name if it is not registered."""
    entry = REGISTRY.get(algorithm)
    return entry.title if entry else algorithm


def _tile_groups(steps: list[Step]) -> tuple[list[tuple[int, int]], list[int]]:
    groups, group_of, first = [], [], 0
    for k in range(1, len(steps) + 1):
        if k == len(steps) or steps[k].tile != steps[first].tile:
            groups.append((first, k - 1))
            group_of += [len(groups) - 1] * (k - first)
            first = k
    return groups, group_of


def key_rows(step: Step, block_cols: int, nk: int) -> tuple[int, int] | None:
    """The key rows [c0, c1) of the step's K/V block j."""
    if step.j is None:
        return None
    return step.j * block_cols, min((step.j + 1) * block_cols, nk)
