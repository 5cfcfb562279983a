"""Packed batches of variable lengths (FlashAttention's `flash_attn_varlen_func`): no padding moved or computed.

q is (total_q, Hq, d) and k, v (total_k, Hkv, d): sequence b is rows cu_seqlens_q[b] … cu_seqlens_q[b + 1] − 1
of q against rows cu_seqlens_k[b] … of k and v. Each sequence runs as its own programs (`sim.run` on its rows),
every one with the blocks chosen for the longest, as one varlen kernel launch would.
"""

import numpy as np

from sim.algorithms import iomodel_variants
from sim.algorithms.registry import get
from sim.api import entry as api
from sim.api.inputs import check_inputs, configure_shape
from sim.api.results import Packed
from sim.api.variant_inputs import check_alibi
from sim.core.dtypes import dtype_name
from sim.core.errors import InputError
from sim.machine.ledger import Ledger


def run_varlen(
    algorithm: str, q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal: bool = False, scale: float | None = None,
    block_rows: int | None = None, block_cols: int | None = None, blocks: str = "fit", sram_bytes: int | None = None,
    hardware=None, record: str = "counts", row: int | None = None, window=None, alibi_slopes=None,
    softcap: float | None = None, pack_gqa: bool = False,
) -> Packed:  # fmt: skip
    """`sim.run` on packed sequences; the Packed result's output is (total_q, Hq, d), its lse (total_q, Hq), and
    `padded` the closed form of the same batch padded to its longest sequences (B, Hq, max N, d). It keeps q, k, v
    and the statistics its forward left (flash1's ℓ, m; flash2's L), so `sim.backward(packed, do)` works. `record`
    and `row` trace the first sequence, as `sim.run` traces its first head."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if np.ndim(x) != 3:
            raise InputError(f"{name}: shape {np.shape(x)}; packed tensors are (total, heads, d)")
    q4, k4, v4 = check_inputs(*(np.swapaxes(np.asarray(x), 0, 1)[None] for x in (q, k, v)))  # (1, H, total, d)
    cq = check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q4.shape[2])
    ck = check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, k4.shape[2])
    if len(cq) != len(ck):
        raise InputError(f"cu_seqlens_k: {len(ck) - 1} sequences, but cu_seqlens_q has {len(cq) - 1}; they must agree")
    lens_q, lens_k = np.diff(cq), np.diff(ck)
    Hq, Hkv, d = q4.shape[1], k4.shape[1], q4.shape[3]
    g = Hq // Hkv
    config = configure_shape(
        algorithm, False, Hq, int(lens_q.max()), int(lens_k.max()), d, dtype_name(q4.dtype), scale, causal, block_rows,
        block_cols, blocks, sram_bytes, hardware, rows=g if pack_gqa else 1,
    )  # fmt: skip
    Br, Bc = config["block_rows"], config["block_cols"]
    slopes = check_alibi(alibi_slopes, len(lens_q), Hq)  # (B, Hq) or None
    output = np.empty(q4.shape[1:], q4.dtype)  # (Hq, total_q, d)
    stats = {name: np.full((Hq, cq[-1]), np.nan, np.float32) for name in get(algorithm).saves if name != "P"}
    ledger, peak, trace = Ledger(), 0, None
    for b in range(len(lens_q)):
        rows, keys = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        r = api.run(
            algorithm, q4[:, :, rows], k4[:, :, keys], v4[:, :, keys], causal=causal, scale=scale, block_rows=Br,
            block_cols=Bc, sram_bytes=config["sram_bytes"], hardware=config["hardware"],
            record=record if b == 0 else "counts", row=row if b == 0 else None, window=window, softcap=softcap,
            pack_gqa=pack_gqa, alibi_slopes=None if slopes is None else slopes[b],
        )  # fmt: skip
        ledger.add(r.ledger)
        output[:, rows], peak = r.output[0], max(peak, r.sram_peak_bytes)
        for name, x in stats.items():  # L (flash2), or ℓ and m (flash1): (Hq, rows) each
            x[:, rows] = r.saved[name][0]
        trace = r.trace if b == 0 else trace
    if trace is not None:  # the first sequence's first program, of a batch of these lengths
        trace.config["seqlens"] = lens_q.tolist()
    s = q4.dtype.itemsize
    variant = dict(causal=causal, window=window, softcap=softcap is not None, alibi=alibi_slopes is not None)
    B, N, Nk = len(lens_q), int(lens_q.max()), int(lens_k.max())
    padded = iomodel_variants.gqa(algorithm, B, Hq, Hkv, N, Nk, d, s, Br, Bc, pack_gqa=pack_gqa, **variant)
    saved = {name: x.T for name, x in stats.items()}  # (total_q, Hq): what the backward reads
    config |= dict(ledger=ledger, sram_peak_bytes=peak, trace=trace, heads=Hq * len(lens_q))
    return Packed(
        **config, window=r.window, alibi_slopes=slopes, softcap=r.softcap, pack_gqa=pack_gqa,
        output=output.swapaxes(0, 1), saved=saved, cu_seqlens_q=cq, cu_seqlens_k=ck, padded=padded,
        q=q4[0].swapaxes(0, 1), k=k4[0].swapaxes(0, 1), v=v4[0].swapaxes(0, 1),
    )  # fmt: skip


def check_cu_seqlens(name: str, cu, total: int) -> np.ndarray:
    """Cumulative sequence lengths: integers from 0, strictly increasing, ending at the tensor's `total` rows."""
    try:
        cu = np.asarray(cu)
    except (TypeError, ValueError) as e:
        raise InputError(f"{name}: not an array of integers ({e})") from None
    if cu.ndim != 1 or cu.size < 2 or not np.issubdtype(cu.dtype, np.integer):
        raise InputError(
            f"{name}: must be a 1-D array of at least 2 integers (0, then each sequence's end), got {cu!r}"
        )
    if cu[0] != 0:
        raise InputError(f"{name}: must start at 0, got {int(cu[0])}")
    steps = np.diff(cu)
    if (steps <= 0).any():
        b = int(np.argmax(steps <= 0))
        raise InputError(f"{name}: not increasing at index {b + 1} ({int(cu[b])} → {int(cu[b + 1])}); "
                         "every sequence needs at least one row")  # fmt: skip
    if cu[-1] != total:
        past = "past" if cu[-1] > total else "short of"
        raise InputError(
            f"{name}: ends at {int(cu[-1])}, {past} the tensor's {total} rows; the last entry is the total"
        )
    return cu.astype(np.int64)
