"""What `flashsim run` reports: a run's counts beside the closed form and standard attention, and its error with a
verdict."""

from collections.abc import Callable

import numpy as np

from sim.algorithms import registry
from sim.api import reference
from sim.api.results import Result
from sim.api.tolerance import score_scale, stated, tolerance
from sim.core.dtypes import itemsize
from sim.core.errors import InputError
from sim.machine import iomodel
from sim.machine.prediction import affordable


def output_check(result: Result, q, k, v, advance: Callable[[int], None] | None = None) -> dict:
    """max |output − float64 reference| over every head, the reference taken on the stored inputs a block of query
    rows at a time (never N × Nk whole), and whether it lies within the bound `sim.api.tolerance` derives for the
    algorithm and dtype (`tolerance` None where none is derived). `advance(rows)` is told of each block done."""
    err, ref_max, s_max = 0.0, 0.0, 0.0
    for b in reference.blocks(q, k, v, causal=result.causal, scale=result.scale):
        diff = np.abs(result.output[..., b.r0 : b.r1, :].astype(np.float64) - b.o)  # (..., rows, d)
        err = float(np.max([err, diff.max(initial=0.0)]))  # a NaN stays (Python's max(0.0, nan) is 0.0: red team 95)
        ref_max, s_max = max(ref_max, float(np.abs(b.o).max(initial=0.0))), max(s_max, b.s_max)
        if advance:
            advance(b.r1 - b.r0)
    check = {"max_abs_err": err, "tolerance": None}
    if stated(result.algorithm):
        tol = tolerance(
            result.algorithm, result.dtype, d=result.d, nk=result.nk, block_cols=result.block_cols,
            sigma=score_scale(q, k, result.scale), v_max=float(np.abs(v.astype(np.float64)).max(initial=0.0)),
            ref_max=ref_max, s_max=s_max,
        )  # fmt: skip
        within = bool(err <= tol.bound) if tol.bound != float("inf") else None  # no bound: no verdict, as variants'
        check["tolerance"] = {"formula": tol.formula, "bound": tol.bound, "within": within}
    return check


def run_report(
    result: Result, *, batch: int = 1, heads: int = 1, check: dict | None = None, max_abs_err: float | None = None
) -> dict:
    """The JSON-ready summary of a run (byte counts cover all batch × heads); `check` is `output_check`'s, if any
    (or only a `max_abs_err` computed elsewhere, with no verdict).

    A run counted from the closed form alone (`sim.api.closed_form`, output None) says so in `source`, and its
    `per_tensor` names kernels.
    """
    s = itemsize(result.dtype)
    closed = registry.counts(
        result.algorithm, result.n, result.nk, result.d, s, result.block_rows, result.block_cols, result.causal
    ).times(result.heads)
    standard = iomodel.standard(result.n, result.nk, result.d, s).times(result.heads)
    ledger = result.ledger
    return {
        "algorithm": result.algorithm,
        "source": "simulated" if result.output is not None else "closed form",
        "n": result.n,
        "nk": result.nk,
        "d": result.d,
        "batch": batch,
        "heads": heads,
        "dtype": result.dtype,
        "causal": result.causal,
        "scale": result.scale,
        "hardware": result.hardware.name,
        "block_rows": result.block_rows,
        "block_cols": result.block_cols,
        "sram_bytes": result.sram_bytes,
        "sram_peak_bytes": result.sram_peak_bytes,
        "hbm_read_bytes": result.hbm_read_bytes,
        "hbm_write_bytes": result.hbm_write_bytes,
        "hbm_bytes": result.hbm_bytes,
        "l2_read_bytes": sum(n for (lvl, _, _), n in ledger.bytes.items() if lvl == "l2"),
        "flops": result.flops,
        "exps": result.exps,
        "per_tensor": ledger.per_tensor("hbm"),
        "closed_form": {
            "hbm_read_bytes": closed.hbm_read_bytes,
            "hbm_write_bytes": closed.hbm_write_bytes,
            "flops": closed.flops,
            "exps": closed.exps,
            "matches": (closed.hbm_read_bytes, closed.hbm_write_bytes, closed.flops, closed.exps)
            == (result.hbm_read_bytes, result.hbm_write_bytes, result.flops, result.exps),
        },
        "standard_hbm_bytes": standard.hbm_bytes,
        "max_abs_err": max_abs_err if check is None else check["max_abs_err"],
        "tolerance": None if check is None else check["tolerance"],
    }


def below_hbm(result) -> dict | None:
    """Below HBM (sim.machine): DRAM bytes and where the time goes, for shapes the L2 model plays quickly, whose
    grid of thread blocks (every head's, which the time model walks one by one) is at most
    sim.machine.prediction.MOST_BLOCKS, and whose kernels one SM can hold (standard attention's softmax keeps a whole
    row of S in shared memory); else None."""
    if not affordable(result.n, result.nk, result.block_rows, result.block_cols, result.heads):
        return None
    try:
        return result.predict().summary()
    except InputError:  # a grid too large to walk, or a launch no SM of this hardware holds: no time to predict
        return None
