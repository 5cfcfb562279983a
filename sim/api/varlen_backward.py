"""The backward of a packed batch (`sim.run_varlen`): each sequence's backward on its own rows, no padding moved.

Sequence b's dQ rows cu_seqlens_q[b] … cu_seqlens_q[b + 1] − 1 and its dK, dV rows cu_seqlens_k[b] … come from
the backward listing run on its rows alone (its Q, O, dO, statistics and K, V placed in HBM), every sequence
with the blocks chosen for the longest, as one varlen kernel launch would; the ledgers add up.
"""

from collections.abc import Callable

import numpy as np

from sim.api.inputs import check_like_q, configure_shape
from sim.api.results import Gradients, Packed
from sim.core.errors import InputError
from sim.machine.ledger import Ledger


def backward(
    result: Packed, do, one: Callable[..., Gradients], *, hardware, sram_bytes: int | None,
    block_rows: int | None = None, block_cols: int | None = None, blocks: str = "fit", record: str = "counts",
    row: int | None = None,
) -> Gradients:  # fmt: skip
    """dQ (total_q, Hq, d), dK, dV (total_k, Hkv, d) of `result` for do (total_q, Hq, d); `one` is the backward of
    one (1, H, N, d) sequence (`sim.api.entry._backward`). `record` and `row` trace the first sequence."""
    if not result.saved:
        raise InputError(
            f"result: a packed batch of {result.algorithm} keeps no statistics for its backward (standard "
            "attention's P is N × Nk per sequence); run_varlen flash1 or flash2 for sim.backward"
        )
    (do,) = check_like_q(result.q, do=do)  # (total_q, Hq, d), finite, in q's dtype
    cq, ck = result.cu_seqlens_q, result.cu_seqlens_k
    lens_q, lens_k = np.diff(cq), np.diff(ck)
    (Hq, d), Hkv = result.q.shape[1:], result.k.shape[1]
    g = Hq // Hkv
    config = configure_shape(
        result.algorithm, True, Hq * len(lens_q), int(lens_q.max()), int(lens_k.max()), d, result.dtype,
        result.scale, result.causal, block_rows, block_cols, blocks, sram_bytes, hardware,
        rows=g if result.pack_gqa else 1, softcap=result.softcap is not None,
    )  # fmt: skip
    dq, dk, dv = np.empty_like(result.q), np.empty_like(result.k), np.empty_like(result.v)
    ledger, peak, trace = Ledger(), 0, None
    for b in range(len(lens_q)):
        rows, keys = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        q, o, dO = (heads_first(x[rows]) for x in (result.q, result.output, do))  # (1, Hq, N_b, d)
        k, v = (heads_first(x[keys]) for x in (result.k, result.v))  # (1, Hkv, Nk_b, d)
        saved = {name: x[rows].T[None] for name, x in result.saved.items()}  # (1, Hq, N_b)
        slopes = None if result.alibi_slopes is None else result.alibi_slopes[b]
        r = one(
            result.algorithm, q, k, v, o, saved, dO, causal=result.causal, scale=result.scale,
            block_rows=config["block_rows"], block_cols=config["block_cols"], sram_bytes=config["sram_bytes"],
            hardware=config["hardware"], record=record if b == 0 else "counts", row=row if b == 0 else None,
            window=result.window, alibi_slopes=slopes, softcap=result.softcap, pack_gqa=result.pack_gqa,
        )  # fmt: skip
        dq[rows], dk[keys], dv[keys] = (x[0].swapaxes(0, 1) for x in (r.dq, r.dk, r.dv))
        ledger.add(r.ledger)
        peak, trace = max(peak, r.sram_peak_bytes), r.trace if b == 0 else trace
    if trace is not None:
        trace.config["seqlens"] = lens_q.tolist()
    config |= dict(ledger=ledger, sram_peak_bytes=peak, trace=trace)
    return Gradients(
        **config, window=result.window, alibi_slopes=result.alibi_slopes, softcap=result.softcap,
        pack_gqa=result.pack_gqa, dq=dq, dk=dk, dv=dv,
    )  # fmt: skip


def heads_first(x: np.ndarray) -> np.ndarray:
    """A sequence's rows (N, H, d) as the batch of one that `sim.backward` takes: (1, H, N, d)."""
    return np.swapaxes(x, 0, 1)[None]
