"""`python -m gpu.lab.training_speed`: forward + backward as a training loop runs it (issue 23's targets), at
FlashAttention-3's shapes (16k tokens, hidden 2048): `gpu.autograd.attention` then `torch.autograd.grad`
("autograd"), the direct CuPy calls ("direct"), and PyTorch's `scaled_dot_product_attention` on the same memory
with its flash backend ("sdpa"), its cuDNN backend ("cudnn") and its own choice ("default"), timed side by side in
interleaved rounds (gpu.lab.timing.interleaved_ms). Prints TFLOP/s (3.5 × the forward's FLOPs) with the fraction of
the H100's 989 dense TFLOP/s, autograd's ratio to each baseline and its tax over the direct calls; `--json` keeps
the rates. The lighter sibling of `flashsim bench gpu --backward` (no standard attention, no memory sweep)."""

import argparse
import json
import math
import shlex
import statistics
import sys

from gpu import device
from gpu.lab import results, sdpa, timing
from gpu.lab.autograd_tax import calls as flash_calls
from gpu.lab.harness import HIDDEN, TOKENS, TRAINING_FLOPS, flops

H100_DENSE = 989.0  # TFLOP/s, fp16/bf16 dense, the H100 SXM datasheet
BASELINES = tuple(sdpa.BACKENDS)  # sdpa, cudnn, default


def row(n: int, d: int, causal: bool, dtype: str) -> dict:
    """TFLOP/s of autograd, direct and each SDPA backend at one shape (a backend PyTorch refuses is left out)."""
    direct, through, (q, k, v, do) = flash_calls(n, d, causal, dtype, arrays=True)
    calls = {"autograd": through, "direct": direct}
    for backend in BASELINES:
        call = sdpa.sdpa_call(q, k, v, causal=causal, scale=1 / math.sqrt(d), backend=backend, do=do)
        try:
            call()
            calls[backend] = call
        except RuntimeError:
            pass
    f = TRAINING_FLOPS * flops(n, n, d, TOKENS // n, HIDDEN // d, causal)
    rates = {name: f / ms / 1e9 for name, ms in timing.interleaved_ms(calls).items()}
    return {"n": n, "d": d, "causal": causal, "dtype": dtype, "tflops": rates}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.training_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--ns", default="1024,2048,4096,8192,16384")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--ds", default="64,128")
    parser.add_argument("--json", help="also write the rows here")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    print(f"device: {device.properties()['name']}; forward + backward, TFLOP/s (fraction of {H100_DENSE:.0f})")
    names = ("autograd", "direct", *BASELINES)
    print(
        f"{'dtype':>9} {'d':>4} {'causal':>6} {'N':>6} "
        + " ".join(f"{x:>11}" for x in names)
        + "  ×sdpa ×cudnn ×default  tax"
    )
    rows = []
    for dtype in args.dtypes.split(","):
        for d in map(int, args.ds.split(",")):
            for causal in (False, True):
                for n in map(int, args.ns.split(",")):
                    r = row(n, d, causal, dtype)
                    rows.append(r)
                    t = r["tflops"]
                    cells = " ".join(
                        f"{t[x]:5.0f} ({t[x] / H100_DENSE:3.0%})" if x in t else f"{'-':>11}" for x in names
                    )
                    ratios = " ".join(f"{t['autograd'] / t[x]:6.2f}" if x in t else f"{'-':>6}" for x in BASELINES)
                    tax = t["direct"] / t["autograd"] - 1
                    print(f"{dtype:>9} {d:>4} {causal!s:>6} {n:>6} {cells} {ratios} {100 * tax:+4.1f}%", flush=True)
    for x in BASELINES:
        ratios = [r["tflops"]["autograd"] / r["tflops"][x] for r in rows if x in r["tflops"]]
        if ratios:
            print(
                f"autograd / {x}: median {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}), "
                f"{sum(q >= 1 for q in ratios)} of {len(ratios)} ≥ 1"
            )
    if args.json:
        env = results.environment(shlex.join(["python", "-m", "gpu.lab.training_speed", *argv]))
        report = {"kind": "training-speed", "env": env, "device": device.properties(), "peak_tflops": H100_DENSE}
        with open(args.json, "w") as f:
            json.dump(report | {"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
