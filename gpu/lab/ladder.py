"""`python -m gpu.lab.ladder --json PATH`: every rung of the kernel ladder (gpu/registry.py) checked against float64, then
timed at one shape of FlashAttention-2's benchmark (16k tokens per batch, hidden 2048), SDPA's flash backend beside
each; the report lesson 8 plots rung by rung (gpu/lab/results.py describes it, kind "ladder").

Forward rungs are timed alone; backward rungs as forward (the default rung) + backward, FLOPs = 3.5 × forward, as in
`bench gpu --backward`. A rung this GPU cannot run (rung 6 off Hopper) is recorded as {"status": "skipped", "why"}.
"""

import argparse
import shlex
import sys

from gpu import device, flash, registry
from gpu.lab import results, sdpa
from gpu.lab.bench import RUNG1_MAX_N
from gpu.lab.checks import random_qkv
from gpu.lab.harness import HIDDEN, TOKENS, TRAINING_FLOPS, check_rung, flops, time_rung
from sim.core.errors import FlashsimError, InputError

N = RUNG1_MAX_N  # the largest N at which `bench gpu` times rung 1 too, so that the two reports meet at one shape
HEAD_DIMS = (64, 128)


def run_ladder(*, n: int = N, ds=HEAD_DIMS, dtype: str = "float16", command: str | None = None) -> dict:
    """Check, then time, every rung for each head dim d, without and with a causal mask; returns the report."""
    if not 1 <= n <= TOKENS:
        raise InputError(f"n: expected 1 … {TOKENS} (the benchmark's tokens per batch), got {n!r}")
    if dtype not in registry.HALF:
        raise InputError(f"dtype: expected one of {', '.join(registry.HALF)} (the tensor-core rungs'), got {dtype!r}")
    device.require()
    cc = device.capability()
    rows = []
    for d in ds:
        q_small = random_qkv(2, 3, 300, 333, d, dtype, seed=d)  # ragged: 300 queries, 333 keys
        for causal in (False, True):
            batch, heads = TOKENS // n, HIDDEN // d
            row = {"n": n, "d": d, "causal": causal, "dtype": dtype, "batch": batch, "heads": heads}
            row["flops"] = flops(n, n, d, batch, heads, causal)
            row["rungs"] = {}
            for number, spec in sorted(registry.LADDER.items()):
                why = spec.fits(d, cc)  # rung 6: Hopper only, d = 64 and 128
                if why:
                    row["rungs"][str(number)] = {"status": "skipped", "why": why}
                    continue
                ok = check_rung(spec, *q_small, causal=causal).ok
                row["rungs"][str(number)] = time_rung(spec, n, d, dtype, causal) if ok else {"status": "check failed"}
            rows.append(row)
    torch_ok, torch_note = sdpa.torch_available()
    return {
        "kind": "ladder",
        "env": results.environment(command),
        "device": device.properties(),
        "torch": torch_note if torch_ok else None,
        "rungs": {
            str(k): {"name": s.name, "direction": s.direction, "file": s.file} for k, s in registry.LADDER.items()
        },
        "rows": rows,
        "notes": [
            f"batch = {TOKENS}/N, heads = {HIDDEN}/d; forward FLOPs = 4·N²·d·batch·heads, halved when causal",
            "forward rungs: the forward alone; backward rungs: the default forward (rung "
            + " / ".join(f"{flash.resolve(None, d).rung} at d = {d}" for d in ds)
            + f" here) + the backward rung, FLOPs = {TRAINING_FLOPS} × forward; sdpa_tflops: SDPA's flash backend on the same call",
            "each rung is checked against float64 first (gpu.lab.checks, 300 queries × 333 keys); a rung that fails "
            "is not timed, one this GPU cannot run is skipped",
        ],
    }


def main(argv=None) -> None:
    """Run the ladder and write its report as JSON."""
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.ladder", description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where to write the report")
    parser.add_argument("--n", type=int, default=N, help="sequence length N = Nk")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "gpu.lab.ladder", *(sys.argv[1:] if argv is None else argv)])
    try:
        report = run_ladder(n=args.n, command=command)
    except FlashsimError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    results.write(report, args.json)
    for row in report["rows"]:
        rates = ", ".join(
            f"rung {k} " + (f"{r['tflops']:.1f}" if "tflops" in r else r["status"]) for k, r in row["rungs"].items()
        )
        print(f"d = {row['d']}, causal = {row['causal']}: {rates} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
