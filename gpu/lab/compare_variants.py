"""The forward's variants, bytes predicted against bytes measured: the simulator's closed form of the same pass
(sim.algorithms.iomodel_variants.gqa with the kernel's Br, Bc: per-head GQA schedule, window block skipping, a packed
batch summed sequence by sequence) beside the L2 → SM bytes Nsight Compute counts for one launch of the kernel.

`python -m gpu.lab.compare_variants [--json PATH]` runs CASES at N = 4096 on the default forward rung for d = 64 and
128 and prints one line a case; a ratio within 1 ± AGREE (5%) agrees."""

import argparse
import shlex
import sys

from gpu import device, flash, registry
from gpu.lab import counters, results
from gpu.lab.compare import AGREE
from sim.algorithms.iomodel_variants import gqa

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
    kv_heads = variant.get("kv_heads", HEADS)
    kw = dict(causal=causal, window=tuple(variant["window"]) if "window" in variant else None,
              softcap="softcap" in variant, alibi=bool(variant.get("alibi")))  # fmt: skip
    lengths = zip(variant.get("seqlens_q", [N]), variant.get("seqlens_k", [N]), strict=True)
    total = [gqa("flash2", 1, HEADS, kv_heads, n, nk, d, 2, tiles.block_rows, tiles.block_cols, **kw)
             for n, nk in lengths]  # fmt: skip
    return sum(c.hbm_read_bytes for c in total), sum(c.hbm_write_bytes for c in total)


def compare_case(name: str, d: int, kernel=None) -> dict:
    """One case: the closed form's bytes, ncu's L2-level bytes and their ratios."""
    causal, variant = CASES[name]
    spec = flash.resolve(kernel, d)
    read, write = predicted(spec, d, causal, variant)
    shape = dict(n=N, nk=N, d=d, batch=1, heads=HEADS, dtype=DTYPE, causal=causal)
    measured = counters.measure("forward", spec.rung, **shape, tma=spec.tma, variant=variant or None)
    row = {"case": name, "d": d, "kernel": spec.rung, "causal": causal, "variant": variant,
           "predicted": {"read": read, "write": write}}  # fmt: skip
    if measured:
        m = measured[spec.function]
        row["measured"] = m
        row["ratio"] = {"read": m["l2_read_bytes"] / read, "write": m["l2_write_bytes"] / write}
        row["agrees"] = all(abs(r - 1) <= AGREE for r in row["ratio"].values())
    return row


def run_compare(ds=(64, 128), *, progress=None, command=None) -> dict:
    """Every case at each head dim in `ds`: the report (kind "compare-variants"); `progress` gets each row's line."""
    device.require()
    rows = []
    for d in ds:
        for name in CASES:
            try:
                row = compare_case(name, d)
            except counters.CounterError as e:
                row = {"case": name, "d": d, "error": str(e)}
            rows.append(row)
            if progress:
                progress(describe(row))
    return {"kind": "compare-variants", "env": results.environment(command), "agree": AGREE, "rows": rows}


def describe(row: dict) -> str:
    """'d=128 gqa 8: read ×1.000, write ×1.000', and '(beyond 5%)' where a ratio is."""
    ratio = row.get("ratio")
    what = f"read ×{ratio['read']:.3f}, write ×{ratio['write']:.3f}" if ratio else row.get("error", "no ncu here")
    return f"d={row['d']} {row['case']}: {what}{'' if row.get('agrees', True) else '  (beyond 5%)'}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.compare_variants")
    parser.add_argument("--json", help="write the report here (gpu/lab/results.py)")
    parser.add_argument("--d", type=int, nargs="+", default=[64, 128])
    a = parser.parse_args(argv)
    command = "python -m gpu.lab.compare_variants " + shlex.join(sys.argv[1:] if argv is None else argv)
    report = run_compare(a.d, progress=lambda line: print(line, flush=True), command=command)
    if a.json:
        results.write(report, a.json)


if __name__ == "__main__":
    main()
