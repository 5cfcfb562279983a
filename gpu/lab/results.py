"""Recorded results: the JSON files `bench gpu`, `compare` and `demo train` write (gpu/lab/results/*.json), which the GPU
lesson loads on machines without a GPU.

Every file is one JSON object:
  "kind"     "bench-forward", "bench-backward", "compare-forward", "compare-backward", "ladder", "train", "model-check",
             "calibration", "bench-decode" or "compare-decode" (rung 8: gpu/lab/bench_decode.py, compare_decode.py)
  "env"      where and how it was measured: "gpu" (name), "cc" (compute capability), "sm_count", "driver"
             (nvidia-smi's driver version, or null), "cuda_driver" (the CUDA version the driver supports, e.g.
             13000), "cupy", "torch" (null without PyTorch), "numpy", "date" (UTC, ISO 8601), "command" (the
             exact command line)
  the body   bench: "kernel" (the default kernel timed), "rows" (one object per configuration: "n", "d",
             "causal", "dtype", "batch", "heads", "flops", then per implementation — "flash", "sdpa" (SDPA's flash
             backend), "cudnn", "default" (PyTorch's own choice), "standard", "rung1" (forward; "v1" in recordings before issue 19), "autograd"
             (backward) — {"ms", "tflops", "peak_extra_bytes"}, in the backward also "backward_ms" and
             "backward_tflops" (the backward alone), or {"status": "OOM" | "skipped" | "error", …}), "notes"
             (strings), and for the backward "memory" (peak extra bytes against N at fixed batch and heads: "n",
             then per implementation);
             compare: "config", "errors", "bytes" (predicted and measured), "time"; ladder (`python -m gpu.lab.ladder`):
             "rungs" (number → name, direction, file), "rows" (per configuration, "rungs": number → {"tflops",
             "sdpa_tflops"} or {"status"}), "notes"; train: see gpu/lab/train.py ("losses" and "tokens_per_s" per run:
             "flash", "standard" and, from issue 23 on, "sdpa"); model-check (`python -m gpu.lab.check_model`):
             "grid", "timed", "profiled" (ncu rows), "compared" (predicted beside measured), "summary"; calibration
             (`python -m gpu.lab.calibrate`): "rates".
Byte counts are bytes, times milliseconds, rates TFLOP/s (1e12 FLOPs per second).
"""

import datetime
import json
import shlex
import shutil
import subprocess
import sys

from gpu import device


def environment(command: str | None = None) -> dict:
    """The "env" object: GPU, driver, library versions, the date and the command (default: this process's argv)."""
    cupy = device.require()
    import numpy

    props = device.properties()
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {
        "gpu": props["name"],
        "cc": props["cc"],
        "sm_count": props["sm_count"],
        "driver": _driver_version(),
        "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
        "cupy": cupy.__version__,
        "torch": torch_version,
        "numpy": numpy.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": command or shlex.join(sys.argv),
    }


def _driver_version() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    run = subprocess.run(
        [smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, check=False
    )
    return run.stdout.strip().splitlines()[0] if run.returncode == 0 and run.stdout.strip() else None


def write(report: dict, path) -> None:
    """Write a report as JSON."""
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1)
