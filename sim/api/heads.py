"""The per-head loop: a listing run on every (batch, head), each on a fresh Chip, the first head traced if asked."""

import numpy as np

from sim.machine.ledger import Ledger
from sim.machine.memory import Chip
from sim.machine.trace import Trace

WATCHERS: list = []  # callables told of every new Chip (a progress display reads its ledger); empty unless one watches


def each_head(costs: dict, name: str, record: str, row, inputs: dict, outputs: dict, kernel, **config) -> dict:
    """Run `kernel(chip, n)` on a fresh Chip for every (batch, head) index, with `inputs` placed in HBM and
    `outputs` filled from it; the first head is traced when `record` asks. Returns the ledger (every head
    summed), the SRAM peak and the trace."""
    ledger, peak, trace = Ledger(), 0, None
    lead = next(iter(inputs.values())).shape[:-2]
    for n, head in enumerate(np.ndindex(*lead)):
        if n == 0 and record != "counts":
            trace = new_trace(costs, name, record, head, inputs, config)
            chip = Chip(costs["sram_bytes"], record, trace, row)
        else:
            chip = Chip(costs["sram_bytes"])
        for watch in WATCHERS:
            watch(chip)
        for tensor, x in inputs.items():
            chip.hbm.place(tensor, x[head])
        kernel(chip, n)
        for tensor, x in outputs.items():
            x[head] = chip.hbm.tensors[tensor]
        ledger.add(chip.ledger)
        peak = max(peak, chip.sram.peak)
        if n == 0 and trace is not None:
            trace.hbm = {t: {"shape": list(a.shape), "dtype": str(a.dtype)} for t, a in chip.hbm.tensors.items()}
    return {"ledger": ledger, "sram_peak_bytes": peak, "trace": trace}


def new_trace(costs: dict, name: str, record: str, head: tuple, inputs: dict, config: dict) -> Trace:
    """An empty trace of one head, its configuration taken from the run's costs (and its inputs, for "values")."""
    keys = ("n", "nk", "d", "dtype", "causal", "scale", "block_rows", "block_cols", "sram_bytes")
    settings = {key: costs[key] for key in keys} | {"hardware": costs["hardware"].name, "head": list(head)} | config
    values = None
    if record == "values":
        values = {name.lower(): inputs[name][head].astype(np.float64).tolist() for name in ("Q", "K", "V")}
    return Trace(name, settings, hbm={}, inputs=values)
