"""Hardware counters of kernel launches through Nsight Compute (`ncu`): bytes at L2 and at DRAM, and time.

`python -m gpu.lab.counters --direction … --kernel … --n …` is the program `measure` hands to ncu: it runs the
forward (or the forward, then the backward) once on random inputs of the given shape (traffic does not depend
on the values); ncu profiles the launches whose names match, one row of counters each.
"""

import argparse
import csv
import dataclasses
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gpu import backward, registry
from sim.core.errors import FlashsimError

# name → (ncu metric, multiplier to bytes or nanoseconds)
METRICS = {
    "cp_async_bytes": ("smsp__inst_executed_op_ldgsts.sum", 512),  # warp-wide cp.async of 16 B per lane: bytes asked
    "l2_read_bytes": ("l1tex__m_xbar2l1tex_read_bytes.sum", 1),  # what L2 delivered to the SMs' L1/TEX units
    "l2_write_bytes": ("lts__t_sectors_srcunit_tex_op_write.sum", 32),  # sectors the SMs wrote into L2
    "l2_reduction_bytes": ("lts__t_sectors_srcunit_tex_op_red.sum", 32),  # sectors the SMs' reductions (atomics) hit
    # the sectors the SMs' global stores send L2 (L2's own count above may merge two halves of a sector that arrive
    # together), and the local stores' (spilled registers) that L1 sends on
    "global_store_bytes": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", 32),
    "local_store_bytes": ("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", 32),
    "dram_read_bytes": ("dram__bytes_read.sum", 1),
    "dram_write_bytes": ("dram__bytes_write.sum", 1),
    "kernel_ns": ("gpu__time_duration.sum", 1),
}
# rung 6 only (an sm_90 metric): what its TMA copies asked L2 for, the counterpart of cp_async_bytes
TMA_METRICS = {"tma_bytes": ("l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum", 1)}
# the backward's launches, in order; rung 7 without the last where it rounds dQ itself (gpu.backward.fused)
BACKWARD_KERNELS = ("flash2_bwd_prepass", "{function}", "flash2_bwd_dq")


class CounterError(FlashsimError):
    """ncu is installed but could not read the counters; the message carries its last words."""


def ncu_path() -> str | None:
    """Where Nsight Compute's `ncu` is, or None."""
    found = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))), None)
    return found or ("/usr/local/cuda/bin/ncu" if Path("/usr/local/cuda/bin/ncu").exists() else None)


def measure(
    direction: str, kernel: int, *, n, nk, d, batch, heads, dtype, causal, swizzle=False, tma=False, variant=None
) -> dict | None:
    """{launched kernel's name: its counters} for one forward (or backward) call on that shape; None without ncu.

    `swizzle` runs a forward tensor-core kernel with XOR-swizzled shared-memory rows instead of padded rows;
    `tma` adds the TMA counters (rung 6, sm_90 only); `variant`: a dict of gpu.lab.variant_checks.make_inputs (a
    backward variant never rounds dQ in the main kernel: gpu.backward.fused)."""
    metrics = METRICS | (TMA_METRICS if tma else {})
    if ncu_path() is None:
        return None
    spec = registry.rung(kernel)
    names = (
        (spec.function,)
        if direction == "forward"
        else tuple(k.format(function=spec.function) for k in BACKWARD_KERNELS)
    )
    if direction == "backward" and not variant and backward.fused(spec, spec.tiles(d), batch * heads):
        names = names[:2]
    sizes = {"n": n, "nk": nk, "d": d, "batch": batch, "heads": heads, "dtype": dtype}
    target = ["-m", "gpu.lab.counters", "--direction", direction, "--kernel", str(kernel)]
    target += [arg for name, value in sizes.items() for arg in (f"--{name}", str(value))]
    target += ["--causal"] * causal + ["--swizzle"] * swizzle + (["--variant", json.dumps(variant)] if variant else [])
    return profile(names, target, metrics)


def profile(names: tuple[str, ...], target: list[str], metrics: dict) -> dict:
    """{kernel name: its counters} of one launch of each of `names` while `python <target…>` runs under ncu."""
    ncu = ncu_path()
    cmd = [ncu, "--clock-control", "none", "--csv", "--print-units", "base"]
    cmd += ["--metrics", ",".join(m for m, _ in metrics.values()), "--launch-count", str(len(names))]
    cmd += ["--kernel-name", "regex:^(" + "|".join(names) + ")$", sys.executable, *target]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
    )
    run = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, timeout=300)
    lines = run.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if run.returncode != 0 or start is None:
        last = (run.stderr.strip() or run.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise CounterError(f"ncu could not profile {', '.join(names)} (exit {run.returncode}): {last[0]}")
    found: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(lines[start:]):
        found.setdefault(row["Kernel Name"].split("(")[0], {})[row["Metric Name"]] = float(
            row["Metric Value"].replace(",", "")
        )
    missing = [name for name in names if name not in found]
    if missing:
        raise CounterError(f"ncu profiled {', '.join(found) or 'nothing'}, not {', '.join(missing)}")
    return {name: {key: found[name][metric] * factor for key, (metric, factor) in metrics.items()} for name in names}


def main(argv=None) -> None:
    """Run the forward (or forward and backward) once on random inputs: the program ncu profiles."""
    from gpu import device, registry
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_like, random_qkv

    parser = argparse.ArgumentParser(prog="python -m gpu.lab.counters")
    for name in ("n", "nk", "d", "batch", "heads"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--direction", choices=("forward", "backward"), required=True)
    parser.add_argument("--kernel", type=int, required=True, help="the rung")
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--swizzle", action="store_true", help="forward: XOR-swizzled shared-memory rows")
    parser.add_argument("--variant", type=json.loads, help="a variant as JSON (gpu.lab.variant_checks)")
    a = parser.parse_args(argv)
    if a.variant:
        from gpu.lab.variant_checks import make_inputs

        q, k, v, kw = make_inputs(a.batch, a.heads, a.n, a.nk, a.d, a.dtype, a.variant)
    else:
        q, k, v = random_qkv(a.batch, a.heads, a.n, a.nk, a.d, a.dtype, seed=0)
        kw = {}
    if a.direction == "forward":
        tiles = dataclasses.replace(registry.forward(a.kernel).default_tiles(a.d), swizzle=True) if a.swizzle else None
        flash_attention(q, k, v, causal=a.causal, kernel=a.kernel, tiles=tiles, **kw)
    else:
        o, lse = flash_attention(q, k, v, causal=a.causal, return_lse=True, **kw)
        flash_attention_backward(q, k, v, o, lse, random_like(q, 1), causal=a.causal, kernel=a.kernel, **kw)
    device.require().cuda.Device().synchronize()


if __name__ == "__main__":
    main()
