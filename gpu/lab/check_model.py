"""Does the machine model tell the truth? DRAM bytes, L2 → SM bytes, time and bound, predicted against the H100.

On the GPU: `python -m gpu.lab.check_model measure OUT.json` times (CUDA-event medians of the public calls) and
profiles (one ncu run over every shape: DRAM and L2 bytes, kernel time, pipe utilization) the fastest forward rung
and backward rung 5 on issue 22's grid. Anywhere: `python -m gpu.lab.check_model report OUT.json [RESULT.json [CALIBRATION.json]]`
puts the model's predictions beside those measurements and says how close each is (also with the rates
`python -m gpu.lab.calibrate` measured, given its recording).
"""

import csv
import json
import subprocess
import sys
from functools import partial
from pathlib import Path

GRID = [
    {"d": d, "n": n, "causal": causal, "batch": batch, "heads": 16}
    for d in (64, 128)
    for n in (1024, 4096, 16384)
    for causal in (False, True)
    for batch in (1, 8)
]
BYTES = {
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_read_bytes": "l1tex__m_xbar2l1tex_read_bytes.sum",  # L2 → SM, as compare reports it
    "lts_bytes": "lts__t_bytes.sum",  # every byte through L2's tag stage
    "kernel_ns": "gpu__time_duration.sum",
}
PIPES = "regex:^(sm__pipe_.*cycles_active|sm__inst_executed_pipe_.*)\\.avg\\.pct_of_peak_sustained_active$"
KERNELS = ("flash2_v4_fwd", "flash2_bwd_prepass", "flash2_v2_bwd", "flash2_bwd_dq")  # per shape, in launch order
FORWARD, BACKWARD = "v4", "v2"  # rung 6 and rung 5


def run_all(profile: bool) -> dict:
    """Every shape once (profile: under ncu) or timed; returns {shape index: {"forward_ms", "backward_ms"}}."""
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab import timing
    from gpu.lab.checks import random_like, random_qkv

    out = {}
    for i, g in enumerate(GRID):
        q, k, v = random_qkv(g["batch"], g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
        o, lse = flash_attention(q, k, v, causal=g["causal"], kernel=FORWARD, return_lse=True)
        do = random_like(q, 1)
        flash_attention_backward(q, k, v, o, lse, do, causal=g["causal"], kernel=BACKWARD)
        if not profile:
            forward = partial(flash_attention, q, k, v, causal=g["causal"], kernel=FORWARD)
            backward = partial(flash_attention_backward, q, k, v, o, lse, do, causal=g["causal"], kernel=BACKWARD)
            out[i] = {"forward_ms": timing.median_ms(forward), "backward_ms": timing.median_ms(backward)}
    return out


def measure(path: str) -> None:
    """Time every shape, then profile them all in one ncu run; write the measurements to `path`."""
    from gpu.lab import counters, results

    record = {
        "kind": "model-check",
        "env": results.environment(f"python -m gpu.lab.check_model measure {path}"),
        "grid": GRID,
        "timed": run_all(False),
    }
    ncu = counters.ncu_path()
    base = [ncu, "--clock-control", "none", "--csv", "--print-units", "base"]
    base += ["--kernel-name", "regex:^(" + "|".join(KERNELS) + ")$"]
    for metrics in (",".join(BYTES.values()) + "," + PIPES, ",".join(BYTES.values())):  # the pipes' regex may fail
        run = subprocess.run(
            [*base, "--metrics", metrics, sys.executable, "-m", "gpu.lab.check_model", "profiled"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        lines = run.stdout.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
        if run.returncode == 0 and start is not None:
            break
        print("ncu failed:", (run.stderr or run.stdout)[-2000:], file=sys.stderr)
    rows: dict[int, dict] = {}
    for row in csv.DictReader(lines[start:] if start is not None else []):
        entry = rows.setdefault(int(row["ID"]), {"kernel": row["Kernel Name"].split("(")[0]})
        entry[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    record["profiled"] = [rows[i] for i in sorted(rows)]
    Path(path).write_text(json.dumps(record, indent=1))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("profiled", "measure", "report") or len(argv) < (1 if argv[0] == "profiled" else 2):
        sys.exit(
            "usage: python -m gpu.lab.check_model measure OUT.json | report MEASURED.json [OUT.json [CALIBRATION.json]]"
        )
    if argv[0] == "profiled":
        run_all(True)
    elif argv[0] == "measure":
        measure(argv[1])
    else:
        from gpu.lab.check_report import report

        report(*argv[1:])


if __name__ == "__main__":
    main()
