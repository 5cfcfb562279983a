"""`python -m gpu.lab.backward_rungs`: the backward alone, rung 5 (mma.sync) against rung 7 (wgmma + TMA) in its
default (dQ_i's columns split between the warpgroups, added by TMA reduce-adds) and variants (atomics instead of the
reduce-adds; each warpgroup all of dQ_i's columns over its own keys; deterministic), timed side by side in
interleaved rounds at FlashAttention-3's shapes (16k tokens, hidden 2048), each after the same forward; TFLOP/s at
2.5 × the forward's FLOPs, and the fraction of the H100's 989 dense TFLOP/s. The evidence behind which backward the
public call picks on an sm_90 GPU (gpu/registry.py)."""

import argparse
import json
import shlex
import sys

from gpu import device
from gpu.backward import flash_attention_backward
from gpu.flash import flash_attention
from gpu.lab import results, timing
from gpu.lab.checks import random_like, random_qkv
from gpu.lab.harness import BACKWARD_FLOPS, HIDDEN, TOKENS, flops
from gpu.tiling import backward_warpgroup_tiles

H100_DENSE = 989.0  # TFLOP/s, fp16/bf16 dense, the H100 SXM datasheet
SPLIT, ATOMICS = backward_warpgroup_tiles(stages=2, split_dq=True), backward_warpgroup_tiles(2, True, dq_atomics=True)
VARIANTS = {  # name → (rung, {d: tiles} (None: the default; a d left out is not timed), deterministic)
    "rung 5": (5, {64: None, 128: None}, False),
    "rung 7": (7, {64: None, 128: None}, False),
    "7 atomics": (7, {64: ATOMICS, 128: ATOMICS}, False),
    "7 unsplit": (7, {64: backward_warpgroup_tiles(stages=2), 128: backward_warpgroup_tiles(stages=2)}, False),
    "7 Br 128": (7, {64: backward_warpgroup_tiles(stages=2, split_dq=True, block_rows=128)}, False),
    "7 determ.": (7, {64: None, 128: None}, True),
}


def _call(arrays, causal, rung, tiles, deterministic):
    return lambda: flash_attention_backward(
        *arrays, causal=causal, kernel=rung, tiles=tiles, deterministic=deterministic
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.backward_rungs", description=__doc__.splitlines()[0])
    parser.add_argument("--ns", default="1024,2048,4096,8192,16384")
    parser.add_argument("--json", help="also write the rates here")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    print(f"device: {device.properties()['name']}, fp16, backward alone, TFLOP/s (fraction of {H100_DENSE:.0f})")
    print(f"{'d':>4} {'causal':>6} {'N':>6} " + " ".join(f"{name:>16}" for name in VARIANTS))
    rows = []
    for d in (64, 128):
        for causal in (False, True):
            for n in map(int, args.ns.split(",")):
                batch, heads = TOKENS // n, HIDDEN // d
                q, k, v = random_qkv(batch, heads, n, n, d, "float16", seed=n + d)
                do = random_like(q, seed=1)
                o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
                calls = {
                    name: _call((q, k, v, o, lse, do), causal, rung, tiles[d], det)
                    for name, (rung, tiles, det) in VARIANTS.items()
                    if d in tiles
                }
                f = BACKWARD_FLOPS * flops(n, n, d, batch, heads, causal)
                rates = {name: f / ms / 1e9 for name, ms in timing.interleaved_ms(calls).items()}
                cells = " ".join(
                    f"{rates[x]:9.0f} ({rates[x] / H100_DENSE:4.0%})" if x in rates else f"{'-':>16}" for x in VARIANTS
                )
                print(f"{d:>4} {causal!s:>6} {n:>6} {cells}", flush=True)
                rows.append({"d": d, "causal": causal, "n": n, "tflops": rates})
    if args.json:
        env = results.environment(shlex.join(["python", "-m", "gpu.lab.backward_rungs", *argv]))
        report = {"kind": "backward-rungs", "env": env, "device": device.properties(), "dtype": "float16", "rows": rows}
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
