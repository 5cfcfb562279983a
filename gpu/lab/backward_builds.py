"""`python -m gpu.lab.backward_builds`: builds of rung 7's backward (the launcher's #defines plus a few injected ones)
side by side with cuDNN's backward, at FlashAttention-3's shapes (16k tokens, hidden 2048), and the share of the
backward's fixed passes. Per shape, in interleaved rounds (gpu.lab.timing.interleaved_ms): each build's
`flash_attention_backward(kernel=7)`, SDPA cuDNN's backward alone (its forward run once before), and the pre-pass and
the dQ rounding pass alone (gpu.backward.prepass, round_dq) under each build. Before timing, each build meets
FlashAttention's criterion against float64 (gpu.lab.checks.check_backward) on ragged, causal and N ≠ Nk shapes, and
its deterministic dQ is the same bit for bit on two runs; a build that fails is not timed. TFLOP/s at 2.5 × the
forward's FLOPs, "×cudnn" each build's rate over cuDNN's, "pre" and "dq" the passes' microseconds; first, the passes
beside copies of the same bytes (`floors`).

  --build NAME:DEF=V,key=V   a build (repeatable): upper-case names are #defines added to rung 7's kernel and to the
                             passes' (gpu.source.function), lower-case ones fields of rung 7's default Tiles
                             (gpu.tiling.Tiles), e.g. --build base: --build st3:stages=3 --build late:SOME_SWITCH=1
"""

import argparse
import dataclasses
import json
import math
import shlex
import statistics
import sys

from gpu import backward, device, inputs, source
from gpu.flash import flash_attention
from gpu.lab import results, sdpa, timing
from gpu.lab.checks import check_backward, random_like, random_qkv
from gpu.lab.harness import BACKWARD_FLOPS, HIDDEN, TOKENS, flops

H100_DENSE = 989.0  # TFLOP/s, fp16/bf16 dense, the H100 SXM datasheet
INJECTED_FILES = ("07_flash2_backward_wgmma.cu", "backward_passes.cu")
CHECK_SHAPES = [  # (batch, heads, N, Nk, d): one row, ragged, N < Nk, N > Nk, several stages' worth of Q blocks
    (1, 1, 1, 1, 64),
    (2, 3, 113, 113, 64),
    (1, 2, 113, 1023, 128),
    (1, 2, 1023, 113, 64),
    (1, 3, 77, 200, 128),
    (1, 1, 1030, 1030, 128),
    (1, 2, 4100, 3000, 64),
]

_injected: dict[str, int] = {}  # #defines
_tiled: dict[str, int] = {}  # Tiles fields
_function, _resolve = source.function, backward.resolve


def _with_injected(spec, defines, smem=0):
    extra = _injected if spec.file in INJECTED_FILES else {}
    return _function(spec, defines | extra, smem)


def _resolve_tiled(kernel, d, variant=backward.PLAIN):
    spec = _resolve(kernel, d, variant)
    if not _tiled or not spec.tma:
        return spec
    default = spec.default_tiles
    return dataclasses.replace(spec, default_tiles=lambda d: dataclasses.replace(default(d), **_tiled))


def parse_build(text: str) -> tuple[str, dict[str, int]]:
    name, _, defs = text.partition(":")
    return name, {k: int(v) for k, v in (item.split("=") for item in defs.split(",") if item)}


def use(defines: dict[str, int]) -> None:
    """Inject `defines` (upper case) into every later build of rung 7 and the passes, the rest into its Tiles."""
    _injected.clear()
    _injected.update({k: v for k, v in defines.items() if k.isupper()})
    _tiled.clear()
    _tiled.update({k: v for k, v in defines.items() if not k.isupper()})
    backward.forget()  # the calls and plans remembered under the build before


def check_build(name: str, defines: dict[str, int], ds=(64, 128)) -> list[str]:
    """Failures of one build at head dims `ds`: the criterion on CHECK_SHAPES (fp16, bf16, causal and not) and
    deterministic dQ."""
    cupy = device.require()
    use(defines)
    failures = []
    for shape in (s for s in CHECK_SHAPES if s[4] in ds):
        for dtype in ("float16", "bfloat16"):
            for causal in (False, True):
                c = check_backward(*random_qkv(*shape, dtype, seed=sum(shape)), causal=causal, kernel=7)
                if not c.ok:
                    failures.append(f"{name} {shape} {dtype} causal={causal}: {c.describe()}")
    for d in ds:
        q, k, v = random_qkv(2, 2, 1500, 1500, d, "float16", seed=d)
        o, lse = flash_attention(q, k, v, causal=True, return_lse=True)
        do = random_like(q, 3)
        runs = [backward.flash_attention_backward(q, k, v, o, lse, do, causal=True, kernel=7, deterministic=True)]
        runs.append(backward.flash_attention_backward(q, k, v, o, lse, do, causal=True, kernel=7, deterministic=True))
        if not all(bool(cupy.array_equal(a, b)) for a, b in zip(*runs, strict=True)):
            failures.append(f"{name} d={d}: deterministic dQ, dK, dV differ between two runs")
        c = check_backward(q, k, v, causal=True, kernel=7, deterministic=True)
        if not c.ok:
            failures.append(f"{name} d={d} deterministic: {c.describe()}")
    return failures


def passes(q, k, v, o, lse, do, causal):
    """The pre-pass and the dQ rounding pass of rung 7's backward on their own, on workspaces made here."""
    cupy = device.require()
    spec = backward.resolve(7, q.shape[3])
    p = inputs.check(q, k, v, causal=causal, scale=None, dtypes_allowed=spec.dtypes, gqa=True)
    tiles, row = spec.tiles(p.d, None), spec.row(p.d)
    D, acc, *blocks = (cupy.empty(shape, dtype=dtype) for shape, dtype, _ in backward.workspace(spec, p, row, tiles))
    dq = cupy.empty_like(q)
    return (lambda: backward.prepass(p, row, o, do, lse, D, acc, *blocks)), (lambda: backward.round_dq(p, row, acc, dq))


def floors(q, k, v, o, lse, do, causal) -> dict[str, float]:
    """Microseconds of the passes beside copies that move the same bytes (interleaved rounds): the pre-pass (reads O
    and dO, writes the float32 accumulator) beside a device-to-device copy of the accumulator (reads and writes as
    many bytes) and a memset of it (its zeroing alone); the dQ pass (reads the accumulator, writes dQ) beside CuPy's
    elementwise cast of the accumulator to dQ's dtype (the same bytes)."""
    cupy = device.require()
    pre, post = passes(q, k, v, o, lse, do, causal)
    acc = cupy.zeros(q.shape, dtype=cupy.float32)
    copy, out = cupy.empty_like(acc), cupy.empty_like(q)
    calls = {"pre": pre, "copy acc": lambda: copy.data.copy_from_device_async(acc.data, acc.nbytes),
             "memset acc": lambda: acc.data.memset_async(0, acc.nbytes), "dq": post,
             "cast acc": lambda: cupy.copyto(out, acc, casting="unsafe")}  # fmt: skip
    return {name: 1e3 * ms for name, ms in timing.interleaved_ms(calls).items()}


def build_calls(timed: dict, arrays: tuple, causal: bool, pre, post) -> dict:
    """Per build: its whole backward, its pre-pass and its dQ pass, each a zero-argument callable."""

    def under(defines, fn):
        def call():
            use(defines)
            fn()

        return call

    calls = {}
    for name, defines in timed.items():
        whole = under(defines, lambda: backward.flash_attention_backward(*arrays, causal=causal, kernel=7))
        calls |= {name: whole, f"{name} pre": under(defines, pre), f"{name} dq": under(defines, post)}
    return calls


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.backward_builds", description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="append", default=[], help="NAME:DEF=V,DEF=V (repeatable)")
    parser.add_argument("--ns", default="1024,2048,4096,8192,16384")
    parser.add_argument("--ds", default="64,128")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--json", help="also write the rates here")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    builds = dict(parse_build(b) for b in args.build or ["default:"])
    source.function, backward.resolve = _with_injected, _resolve_tiled
    print(
        f"device: {device.properties()['name']}, {args.dtype}, backward alone, TFLOP/s (fraction of {H100_DENSE:.0f})"
    )
    q, k, v = random_qkv(TOKENS // 1024, HIDDEN // 64, 1024, 1024, 64, args.dtype, seed=0)
    o, lse = flash_attention(q, k, v, return_lse=True)
    bound = floors(q, k, v, o, lse, random_like(q, seed=1), False)
    print("passes beside the same bytes (µs, d = 64, N = 1024):", " ".join(f"{k} {t:.1f}" for k, t in bound.items()))
    timed = {}
    for name, defines in builds.items():
        failures = check_build(name, defines, tuple(map(int, args.ds.split(","))))
        print(f"check {name} {defines}: {'ok' if not failures else 'FAILED'}", flush=True)
        for f in failures:
            print("  ", f)
        if not failures:
            timed[name] = defines
    rows = []
    for d in map(int, args.ds.split(",")):
        for causal in (False, True):
            for n in map(int, args.ns.split(",")):
                batch, heads = TOKENS // n, HIDDEN // d
                q, k, v = random_qkv(batch, heads, n, n, d, args.dtype, seed=n + d)
                do = random_like(q, seed=1)
                o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
                pre, post = passes(q, k, v, o, lse, do, causal)
                calls = build_calls(timed, (q, k, v, o, lse, do), causal, pre, post)
                cudnn = sdpa.sdpa_call(q, k, v, causal=causal, scale=1 / math.sqrt(d), backend="cudnn", do=do,
                                       backward_only=True)  # fmt: skip
                if cudnn is not None:
                    calls["cudnn"] = cudnn
                ms = timing.interleaved_ms(calls)
                f = BACKWARD_FLOPS * flops(n, n, d, batch, heads, causal)
                rates = {name: f / ms[name] / 1e9 for name in (*timed, "cudnn") if name in ms}
                us = {name: 1e3 * t for name, t in ms.items() if name.endswith((" pre", " dq"))}
                cells = " ".join(
                    f"{name} {rates[name]:4.0f}" + (f" ×{rates[name] / rates['cudnn']:.3f}" if "cudnn" in rates else "")
                    + f" pre {us[name + ' pre']:5.1f} dq {us[name + ' dq']:5.1f} ({1e3 * ms[name]:6.0f} µs)"
                    for name in timed
                )  # fmt: skip
                print(f"{d:>4} {causal!s:>6} {n:>6} cudnn {rates.get('cudnn', 0):4.0f} | {cells}", flush=True)
                rows.append({"d": d, "causal": causal, "n": n, "tflops": rates, "passes_us": us})
    for name in timed:
        ratios = [r["tflops"][name] / r["tflops"]["cudnn"] for r in rows if "cudnn" in r["tflops"]]
        first = next(iter(timed))
        gain = [r["tflops"][name] / r["tflops"][first] for r in rows]
        if ratios:
            print(
                f"{name}: ×cudnn median {statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}); "
                f"×{first} geometric mean {math.exp(statistics.fmean(map(math.log, gain))):.3f} "
                f"({min(gain):.3f}–{max(gain):.3f})"
            )
    if args.json:
        env = results.environment(shlex.join(["python", "-m", "gpu.lab.backward_builds", *argv]))
        report = {"kind": "backward-builds", "env": env, "device": device.properties(), "dtype": args.dtype,
                  "builds": builds, "floors_us": bound, "rows": rows}  # fmt: skip
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
