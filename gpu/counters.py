"""Hardware counters of one kernel launch through Nsight Compute (`ncu`): bytes at L2 and at DRAM, and time.

`python -m gpu.counters --kernel v2 --n … ` is the program `measure` hands to ncu: it runs the kernel once
on random inputs of the given shape (traffic does not depend on the values).
"""

import argparse
import csv
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sim.errors import FlashsimError

# name → (ncu metric, multiplier to bytes or nanoseconds)
METRICS = {
    "cp_async_bytes": (
        "smsp__inst_executed_op_ldgsts.sum",
        512,
    ),  # warp-wide cp.async of 16 B per lane: what v2 asks for
    "l2_read_bytes": ("l1tex__m_xbar2l1tex_read_bytes.sum", 1),  # what L2 delivered to the SMs' L1/TEX units
    "l2_write_bytes": ("lts__t_sectors_srcunit_tex_op_write.sum", 32),  # sectors the SMs wrote into L2
    "dram_read_bytes": ("dram__bytes_read.sum", 1),
    "dram_write_bytes": ("dram__bytes_write.sum", 1),
    "kernel_ns": ("gpu__time_duration.sum", 1),
}


class CounterError(FlashsimError):
    """ncu is installed but could not read the counters; the message carries its last words."""


def ncu_path() -> str | None:
    """Where Nsight Compute's `ncu` is, or None."""
    found = shutil.which("ncu") or next(iter(sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))), None)
    return found or ("/usr/local/cuda/bin/ncu" if Path("/usr/local/cuda/bin/ncu").exists() else None)


def measure(kernel: str, *, n, nk, d, batch, heads, dtype, causal, swizzle=False) -> dict[str, float] | None:
    """The counters of one launch of `kernel` (a flash kernel name) on that shape; None without ncu.

    `swizzle` runs v2 with XOR-swizzled shared-memory rows instead of its default padded rows."""
    from gpu import tiling

    ncu = ncu_path()
    if ncu is None:
        return None
    sizes = {"n": n, "nk": nk, "d": d, "batch": batch, "heads": heads, "dtype": dtype}
    target = [sys.executable, "-m", "gpu.counters", "--kernel", kernel]
    target += [arg for name, value in sizes.items() for arg in (f"--{name}", str(value))]
    target += ["--causal"] * causal + ["--swizzle"] * swizzle
    cmd = [ncu, "--clock-control", "none", "--csv", "--print-units", "base"]
    cmd += ["--metrics", ",".join(m for m, _ in METRICS.values()), "--launch-count", "1"]
    cmd += ["--kernel-name", f"regex:{tiling.KERNEL_FUNCTIONS[kernel]}", *target]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH", "")])
    )
    run = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, timeout=300)
    lines = run.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if run.returncode != 0 or start is None:
        last = (run.stderr.strip() or run.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise CounterError(f"ncu could not profile {kernel} (exit {run.returncode}): {last[0]}")
    values = {row["Metric Name"]: float(row["Metric Value"].replace(",", "")) for row in csv.DictReader(lines[start:])}
    return {name: values[metric] * factor for name, (metric, factor) in METRICS.items()}


def main(argv=None) -> None:
    """Run one flash kernel once on random inputs (the program ncu profiles)."""
    from gpu import device, tiling
    from gpu.flash import flash_attention
    from gpu.harness import random_qkv

    parser = argparse.ArgumentParser(prog="python -m gpu.counters")
    for name in ("n", "nk", "d", "batch", "heads"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument(
        "--swizzle", action="store_true", help="v2: XOR-swizzled shared-memory rows instead of padded rows"
    )
    a = parser.parse_args(argv)
    q, k, v = random_qkv(a.batch, a.heads, a.n, a.nk, a.d, a.dtype, seed=0)
    tiles = tiling.with_defaults(a.kernel, a.d, swizzle=True) if a.swizzle else None
    flash_attention(q, k, v, causal=a.causal, kernel=a.kernel, tiles=tiles, check_finite=False)
    device.require().cuda.Device().synchronize()


if __name__ == "__main__":
    main()
