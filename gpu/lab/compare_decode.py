"""`flashsim compare --decode`: sim.decode beside rung 8 (gpu.decode) on one problem: the outputs, and the bytes the
simulator counts between HBM and SRAM against what Nsight Compute measures at L2 (the split kernel with the combine
fused into it, every head).

`python -m gpu.lab.compare_decode --target '<problem as JSON>'` is the program ncu profiles: one gpu.decode call.
"""

import argparse
import json
import math

import numpy as np

import sim
from gpu import decoding, device
from gpu.lab import counters, results
from gpu.lab.compare import AGREE, to_device
from sim.core.dtypes import DTYPES
from sim.machine import hardware

KERNELS = ("flash_decoding_split",)  # the combine is fused into it (gpu.decoding.launch)
SIM_DTYPE = {"float16": "fp16", "bfloat16": "bf16"}


def problem(*, batch, heads, kv_heads, nq, nk, d, dtype, page_size=None, seed=0) -> dict:
    """Host arrays of one decode problem: q, k, v (a contiguous cache of nk keys, or a paged one: sequence b holds
    nk − b·nk/(2·batch) keys in pages of `page_size`, the pages shuffled) and the paged call's block_table, cache_seqlens."""
    rng = np.random.default_rng(seed)
    store = DTYPES[SIM_DTYPE[dtype]]
    q = rng.standard_normal((batch, heads, nq, d)).astype(np.float32).astype(store)
    if page_size is None:
        k, v = (rng.standard_normal((batch, kv_heads, nk, d)).astype(np.float32).astype(store) for _ in range(2))
        return {"q": q, "k": k, "v": v}
    seqlens = np.array([nk - b * nk // (2 * batch) for b in range(batch)], np.int32)
    per = math.ceil(nk / page_size)
    table = rng.permutation(batch * per).astype(np.int32).reshape(batch, per)
    shape = (batch * per, page_size, kv_heads, d)
    k, v = (rng.standard_normal(shape).astype(np.float32).astype(store) for _ in range(2))
    return {"q": q, "k": k, "v": v, "block_table": table, "cache_seqlens": seqlens}


def compare_decode(*, causal=False, profile=True, command=None, **shape) -> dict:
    """The comparison as a recorded result (gpu/lab/results.py), kind "compare-decode"."""
    device.require()
    arrays = problem(**shape)
    paged = {name: arrays[name] for name in ("block_table", "cache_seqlens") if name in arrays}
    props = device.properties()
    hw = device.preset_for(props["name"]) or hardware.get(hardware.DEFAULT)
    result = sim.decode(arrays["q"], arrays["k"], arrays["v"], causal=causal, hardware=hw, **paged)
    q, k, v = (to_device(arrays[name]) for name in ("q", "k", "v"))
    o, lse = decoding.decode(q, k, v, causal=causal, return_lse=True, **paged)
    gpu_o = o.view(np.uint16).get().view(result.output.dtype).astype(np.float64)
    seen = np.isfinite(result.lse)
    errors = {
        "o": float(np.abs(gpu_o - result.output.astype(np.float64)).max()),
        "lse": float(np.abs(lse.get() - result.lse)[seen].max()) if seen.any() else 0.0,
        "lse_neginf_agree": bool(np.array_equal(np.isneginf(lse.get()), ~seen)),
    }
    measured, note = None, ""
    if not profile:
        note = "counters not asked for (--no-counters)"
    elif counters.ncu_path() is None:
        note = "Nsight Compute (ncu) is not installed here: bytes are predicted only"
    else:
        names = KERNELS
        target = ["-m", "gpu.lab.compare_decode", "--target", json.dumps(shape | {"causal": causal})]
        try:
            per_kernel = counters.profile(names, target, counters.METRICS)
            measured = {key: sum(c[key] for c in per_kernel.values()) for key in counters.METRICS} | {
                "per_kernel": per_kernel
            }
        except counters.CounterError as e:
            note = str(e)
    predicted = {"read": result.hbm_read_bytes, "write": result.hbm_write_bytes}
    ratios = None
    if measured:
        ratios = {
            "read": measured["l2_read_bytes"] / predicted["read"],
            "write": measured["l2_write_bytes"] / predicted["write"],
        }
    return {
        "kind": "compare-decode",
        "env": results.environment(command),
        "config": shape | {"causal": causal, "splits": result.splits, "device": props["name"], "preset": hw.name},
        "errors_gpu_vs_sim": errors,
        "bytes": {"predicted": predicted, "measured": measured, "ratio": ratios, "note": note},
        "agree": None if ratios is None else all(abs(r - 1) <= AGREE for r in ratios.values()),
    }


def summary(report: dict) -> str:
    """The comparison in a few lines: the problem, the outputs' agreement, predicted against measured bytes."""
    c, b, e = report["config"], report["bytes"], report["errors_gpu_vs_sim"]
    cache = f"pages of {c['page_size']}" if c.get("page_size") else "contiguous"
    lines = [
        f"decode: batch {c['batch']}, {c['heads']}/{c['kv_heads']} heads, Nq {c['nq']}, Nk {c['nk']}, d {c['d']}, "
        f"{c['dtype']}, {cache}, {'causal' if c['causal'] else 'full'}, {c['splits']} splits ({c['preset']})",
        f"gpu vs sim: max|Δo| {e['o']:.2e}, max|Δlse| {e['lse']:.2e}",
        f"predicted bytes: read {b['predicted']['read']:,}, write {b['predicted']['write']:,}",
    ]
    if b["measured"]:
        m, r = b["measured"], b["ratio"]
        lines.append(f"L2 (ncu): read {m['l2_read_bytes']:,.0f} (×{r['read']:.3f}), write {m['l2_write_bytes']:,.0f} "
                     f"(×{r['write']:.3f}): {'within' if report['agree'] else 'beyond'} {AGREE:.0%}")  # fmt: skip
    else:
        lines.append(b["note"])
    return "\n".join(lines)


def main(argv=None) -> None:
    """The program ncu profiles: one gpu.decode call on `problem(**target)`."""
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.compare_decode")
    parser.add_argument("--target", required=True, help="the problem's keyword arguments and causal, as JSON")
    shape = json.loads(parser.parse_args(argv).target)
    causal = shape.pop("causal")
    arrays = problem(**shape)
    q, k, v = (to_device(arrays.pop(name)) for name in ("q", "k", "v"))
    decoding.decode(q, k, v, causal=causal, **arrays)
    device.require().cuda.Device().synchronize()


if __name__ == "__main__":
    main()
