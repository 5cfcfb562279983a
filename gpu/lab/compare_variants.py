"""The variants, bytes predicted against bytes measured: the simulator's closed form of the same pass with the kernel's
Br, Bc (sim.algorithms.iomodel_variants: the forward per head, the backward in the grouped schedule its kernels walk;
window block skipping; a packed batch summed sequence by sequence) beside the L2 → SM bytes Nsight Compute counts for
one launch of the kernel.

`python -m gpu.lab.compare_variants [--backward] [--json PATH]` runs CASES at N = 4096 on the default rung for each
head dim and variant (forward: rung 6; backward: rung 7, or rung 5 where a GPU has no rung 7) and prints
one line a case; a ratio within 1 ± AGREE (5%) agrees. The backward's main kernel: its reads less dQ_i (never read:
the kernels add into a float32 copy in L2), those additions (float32, once per tile pair), and its writes of dK_j,
dV_j as the code stores them: rung 7 stores four bytes a lane, a quad's 16 bytes of a row in a 32-byte sector of its
own, so its global stores send L2 twice the bytes in sectors (gpu.lab.check_report.l2_counts). The writes are those
stores' sectors as L1 sends them: L2's own count of written sectors (kept in the row) merges some halves that arrive
together (×0.92–0.99 of them, run 47) and takes in the write-backs of spilled registers (rung 7's NVRTC build at
d = 64 spills 8 bytes a thread, once per step), which the line names apart."""

import argparse
import shlex
import sys

from gpu import device, flash, registry
from gpu.lab import counters, results
from gpu.lab.compare import AGREE
from gpu.variants import Variant
from sim.algorithms.iomodel_variants import gqa, grouped_backward
from sim.core.dtypes import F
from sim.core.format import decimal_bytes

N, HEADS, DTYPE = 4096, 16, "float16"
SPREAD = [4096, 2048, 3072, 2560, 3584, 2304]  # a packed batch of lengths within 2× of each other
CASES = {  # name → (causal, variant dict of gpu.lab.variant_checks.make_inputs)
    "plain causal": (True, {}),
    "gqa 8": (False, {"kv_heads": HEADS // 8}),
    "gqa 8 causal": (True, {"kv_heads": HEADS // 8}),
    "window 1024": (False, {"window": [1024, 0]}),
    "window 1024 both sides": (False, {"window": [1024, 1024]}),
    "alibi causal": (True, {"alibi": True}),
    "softcap": (False, {"softcap": 30.0}),
    "varlen causal": (True, {"seqlens_q": SPREAD, "seqlens_k": SPREAD}),
    "varlen gqa window": (False, {"kv_heads": 2, "window": [512, 0], "seqlens_q": SPREAD, "seqlens_k": SPREAD}),
}


def predicted(spec: registry.KernelSpec, d: int, causal: bool, variant: dict) -> tuple[int, int]:
    """(read, write) bytes of the simulator's closed form for the kernel's tiling."""
    tiles = spec.default_tiles(d)
    total = [gqa("flash2", 1, HEADS, kv_heads, n, nk, d, 2, tiles.block_rows, tiles.block_cols, **kw)
             for kv_heads, n, nk, kw in sequences(causal, variant)]  # fmt: skip
    return sum(c.hbm_read_bytes for c in total), sum(c.hbm_write_bytes for c in total)


def predicted_backward(spec: registry.KernelSpec, d: int, causal: bool, variant: dict) -> dict[str, int]:
    """The backward main kernel's bytes in the grouped closed form, as the kernel moves them: "read" less dQ_i,
    "reduced" (dQ_i's float32 additions), "write" (dK_j, dV_j, in sectors as the rung stores them)."""
    tiles, out = spec.default_tiles(d), {"read": 0, "reduced": 0, "write": 0}
    for kv_heads, n, nk, kw in sequences(causal, variant):
        _, main = grouped_backward(1, HEADS, kv_heads, n, nk, d, 2, tiles.block_rows, tiles.block_cols, **kw)[1]
        grads = 2 * 2 * nk * d * kv_heads  # dK, dV of the sequence's K/V heads, fp16
        dq = main.hbm_write_bytes - grads  # dQ_i written back once per tile pair, as often read
        out["read"] += main.hbm_read_bytes - dq
        out["reduced"] += dq * F // 2
        out["write"] += grads * (2 if spec.tma else 1)
    return out


def sequences(causal: bool, variant: dict):
    """(K/V heads, N, Nk, the closed form's keywords) of each sequence of a case (one unless packed)."""
    kw = dict(causal=causal, window=tuple(variant["window"]) if "window" in variant else None,
              softcap="softcap" in variant, alibi=bool(variant.get("alibi")))  # fmt: skip
    lengths = zip(variant.get("seqlens_q", [N]), variant.get("seqlens_k", [N]), strict=True)
    return [(variant.get("kv_heads", HEADS), n, nk, kw) for n, nk in lengths]


def kinds(variant: dict) -> tuple[str, ...]:
    """The case's variants by gpu.registry.VARIANTS' names (which rung runs it), as gpu.variants.Variant names a
    call's (True standing for a device array)."""
    packed = True if "seqlens_q" in variant else None
    return Variant(group=HEADS // variant.get("kv_heads", HEADS), window=variant.get("window"),
                   slopes=True if variant.get("alibi") else None, softcap=variant.get("softcap"),
                   cu_seqlens_q=packed, cu_seqlens_k=packed).kinds  # fmt: skip


def compare_case(name: str, d: int, kernel=None, direction: str = "forward") -> dict:
    """One case: the closed form's bytes, ncu's L2-level bytes and their ratios."""
    causal, variant = CASES[name]
    forward = direction == "forward"
    spec = flash.resolve(kernel, d) if forward else registry.backward(kernel, d, device.capability(), kinds(variant))
    shape = dict(n=N, nk=N, d=d, batch=1, heads=HEADS, dtype=DTYPE, causal=causal)
    measured = counters.measure(direction, spec.rung, **shape, tma=spec.tma and forward, variant=variant or None)
    row = {"case": name, "d": d, "kernel": spec.rung, "causal": causal, "variant": variant, "direction": direction}
    if forward:
        read, write = predicted(spec, d, causal, variant)
        row["predicted"], keys = {"read": read, "write": write}, {"read": "l2_read_bytes", "write": "l2_write_bytes"}
    else:
        row["predicted"] = predicted_backward(spec, d, causal, variant)
        keys = {"read": "l2_read_bytes", "reduced": "l2_reduction_bytes", "write": "global_store_bytes"}
    if measured:
        m = measured[spec.function]
        row["measured"] = m
        row["ratio"] = {what: m[key] / row["predicted"][what] for what, key in keys.items()}
        row["agrees"] = all(abs(r - 1) <= AGREE for r in row["ratio"].values())
    return row


def run_compare(ds=(64, 128), *, direction: str = "forward", progress=None, command=None) -> dict:
    """Every case at each head dim in `ds`, forward or backward: the report (kind "compare-variants"); `progress` gets
    each row's line."""
    device.require()
    rows = []
    for d in ds:
        for name in CASES:
            try:
                row = compare_case(name, d, direction=direction)
            except counters.CounterError as e:
                row = {"case": name, "d": d, "direction": direction, "error": str(e)}
            rows.append(row)
            if progress:
                progress(describe(row))
    report = {"kind": "compare-variants", "env": results.environment(command), "agree": AGREE, "rows": rows}
    return report | {"direction": direction}


def describe(row: dict) -> str:
    """'d=128 gqa 8: read ×1.000, write ×1.000' (the backward's: rung, read, reduced, write), and '(beyond 5%)' where
    a ratio is."""
    ratio = row.get("ratio")
    what = ", ".join(f"{k} ×{r:.3f}" for k, r in ratio.items()) if ratio else row.get("error", "no ncu here")
    rung = f" (rung {row['kernel']})" if row.get("direction") == "backward" and "kernel" in row else ""
    spilled = row.get("measured", {}).get("local_store_bytes", 0) if rung else 0
    what += f"; spilled registers: {decimal_bytes(spilled)} stored" if spilled else ""
    return f"d={row['d']} {row['case']}{rung}: {what}{'' if row.get('agrees', True) else '  (beyond 5%)'}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.compare_variants")
    parser.add_argument("--json", help="write the report here (gpu/lab/results.py)")
    parser.add_argument("--d", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--backward", action="store_true", help="the backward's main kernel instead of the forward")
    a = parser.parse_args(argv)
    command = "python -m gpu.lab.compare_variants " + shlex.join(sys.argv[1:] if argv is None else argv)
    direction = "backward" if a.backward else "forward"
    report = run_compare(a.d, direction=direction, progress=lambda line: print(line, flush=True), command=command)
    if a.json:
        results.write(report, a.json)


if __name__ == "__main__":
    main()
