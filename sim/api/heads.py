"""The per-head loop: a listing run on every program (a (batch, head), or a GQA group packed together), each on a
fresh Chip, the first program traced if asked."""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from sim.machine.ledger import Ledger
from sim.machine.memory import Chip
from sim.machine.trace import Trace

WATCHERS: list = []  # callables told of every new Chip (a progress display reads its ledger); empty unless one watches


@dataclass
class Program:
    """One thread block's work: the tensors it finds in HBM, where its outputs go, and what it is told."""

    head: tuple  # the (batch, head) index of its (first) query head
    inputs: dict[str, np.ndarray]  # tensor name → array placed in HBM
    outputs: Callable[[dict[str, np.ndarray]], None]  # takes the chip's HBM tensors and stores its outputs
    options: dict = field(default_factory=dict)  # keyword arguments for the listing (e.g. its `scores`)
    about: dict = field(default_factory=dict)  # what a trace of it says beside the run's settings (its K/V head)
    destinations: dict[str, np.ndarray] = field(default_factory=dict)  # where an output goes: HBM allocates it there


def heads_of(inputs: dict, outputs: dict) -> list[Program]:
    """One program per (batch, head) index, every tensor sliced at that index (no GQA, no packing)."""
    lead = next(iter(inputs.values())).shape[:-2]

    def put_back(head):
        def store(tensors):
            for name, x in outputs.items():
                if not np.may_share_memory(x[head], tensors[name]):  # else HBM allocated it there (`destinations`)
                    x[head] = tensors[name]

        return store

    return [
        Program(
            h, {n: x[h] for n, x in inputs.items()}, put_back(h), destinations={n: x[h] for n, x in outputs.items()}
        )
        for h in np.ndindex(*lead)
    ]


def each_program(costs: dict, name: str, record: str, row, programs: list[Program], kernel, **config) -> dict:
    """Run `kernel(chip, n, **program.options)` on a fresh Chip for every program, its inputs placed in HBM and its
    outputs taken back; the first is traced when `record` asks. Returns the ledger (every program summed), the
    SRAM peak and the trace."""
    ledger, peak, trace = Ledger(), 0, None
    for n, program in enumerate(programs):
        if n == 0 and record != "counts":
            trace = new_trace(costs, name, record, program, config | program.about)
            chip = Chip(costs["sram_bytes"], record, trace, row)
        else:
            chip = Chip(costs["sram_bytes"])
        for watch in WATCHERS:
            watch(chip)
        for tensor, x in program.inputs.items():
            chip.hbm.place(tensor, x)
        chip.hbm.destinations = program.destinations
        kernel(chip, n, **program.options)
        program.outputs(chip.hbm.tensors)
        ledger.add(chip.ledger)
        peak = max(peak, chip.sram.peak)
        if n == 0 and trace is not None:
            trace.hbm = {t: {"shape": list(a.shape), "dtype": str(a.dtype)} for t, a in chip.hbm.tensors.items()}
    return {"ledger": ledger, "sram_peak_bytes": peak, "trace": trace}


def each_head(costs: dict, name: str, record: str, row, inputs: dict, outputs: dict, kernel, **config) -> dict:
    """`each_program` over every (batch, head) index, `kernel(chip, n)` on each."""
    return each_program(costs, name, record, row, heads_of(inputs, outputs), kernel, **config)


def new_trace(costs: dict, name: str, record: str, program: Program, config: dict) -> Trace:
    """An empty trace of one program, its configuration taken from the run's costs (and its inputs, for "values")."""
    keys = ("n", "nk", "d", "dtype", "causal", "scale", "block_rows", "block_cols", "sram_bytes")
    settings = {key: costs[key] for key in keys} | {"hardware": costs["hardware"].name, "head": list(program.head)}
    values = None
    if record == "values":
        values = {name.lower(): program.inputs[name].astype(np.float64).tolist() for name in ("Q", "K", "V")}
    return Trace(name, settings | config, hbm={}, inputs=values)
