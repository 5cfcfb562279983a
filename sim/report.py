"""What `flashsim run` reports: a run's counts beside the closed form and beside standard attention."""

import numpy as np

from sim import iomodel, reference
from sim.dtypes import itemsize
from sim.results import Result


def max_abs_error(result: Result, q, k, v) -> float:
    """max |output − float64 reference| over every head, the reference taken on the stored inputs."""
    err = 0.0
    for head in np.ndindex(q.shape[:-2]):
        ref, _ = reference.attention(q[head], k[head], v[head], causal=result.causal, scale=result.scale)
        err = max(err, float(np.abs(result.output[head].astype(np.float64) - ref).max()))
    return err


def run_report(result: Result, *, batch: int = 1, heads: int = 1, max_abs_err: float | None = None) -> dict:
    """The JSON-ready summary of a run (byte counts cover all batch × heads)."""
    s = itemsize(result.dtype)
    closed = iomodel.counts(
        result.algorithm, result.n, result.nk, result.d, s, result.block_rows, result.block_cols, result.causal
    ).times(result.heads)
    standard = iomodel.standard(result.n, result.nk, result.d, s).times(result.heads)
    ledger = result.ledger
    return {
        "algorithm": result.algorithm,
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
        "max_abs_err": max_abs_err,
    }
