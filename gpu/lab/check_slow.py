"""`python -m gpu.lab.check_slow OUT.json --over MEASURED.json` (on a GPU, ncu): the forward calls check_model's grid
profiles only up to a length (`model_grid.SLOW`: rung 1 runs at ~3 TFLOP/s, seconds a launch past N = 4096, and its
full set of counters takes ~40 ncu passes), profiled past it for their bytes alone — DRAM read and written, L2 → SM,
L2's tag bytes, kernel time: the few passes of `check_model.BYTES` — and written with MEASURED's record into OUT, so
that `check_model report` judges issue 22's DRAM and L2 → SM lines for every forward rung on the whole grid.
"""

import json
import subprocess
import sys
from pathlib import Path

from gpu.lab.check_model import BYTES, profiled_rows
from gpu.lab.model_grid import GRID, SLOW


def slow_calls() -> list[tuple[int, int]]:
    """(shape index, rung) of each forward call the grid's profile leaves out: a rung past its largest N."""
    return [(i, rung) for i, g in enumerate(GRID) for rung, most in SLOW.items() if g["n"] > most]


def run() -> None:
    """Each slow call once, in slow_calls' order (the program ncu profiles)."""
    from gpu import device
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_qkv

    for i, rung in slow_calls():
        g = GRID[i]
        q, k, v = random_qkv(g["batch"], g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
        flash_attention(q, k, v, causal=g["causal"], kernel=rung)
        device.require().cuda.Device().synchronize()
        print(f"ran rung {rung} on shape {i}", file=sys.stderr, flush=True)


def merged(record: dict, rows: list[dict]) -> dict:
    """`record` (check_model's, the whole grid) with ncu's `rows` of the slow calls in place of any it had."""
    calls = slow_calls()
    if [r["kernel"] for r in rows] != [launched_by(rung) for _, rung in calls]:
        sys.exit(f"check_slow: ncu profiled {len(rows)} launches, not the {len(calls)} slow calls in order")
    slow = {(i, "forward", rung) for i, rung in calls}
    kept = [r for r in record["profiled"] if (r["shape"], r["direction"], r["rung"]) not in slow]
    added = [{**r, "shape": i, "direction": "forward", "rung": rung} for (i, rung), r in zip(calls, rows, strict=True)]
    return {**record, "profiled": kept + added}


def launched_by(rung: int) -> str:
    """The CUDA function forward rung `rung` launches."""
    from gpu import registry

    return registry.FORWARD[rung].function


def measure(path: str, over: str) -> None:
    """Profile the slow calls under ncu (`BYTES`) and write `over`'s record with them into `path`."""
    from gpu.lab import counters, results

    names = sorted({launched_by(rung) for _, rung in slow_calls()})
    command = [counters.ncu_path(), "--clock-control", "none", "--csv", "--print-units", "base",
               "--kernel-name", "regex:^(" + "|".join(names) + ")$", "--metrics", ",".join(BYTES.values()),
               sys.executable, "-m", "gpu.lab.check_slow", "run"]  # fmt: skip
    ran = subprocess.run(command, capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        sys.exit(f"check_slow: ncu failed: {(ran.stderr or ran.stdout)[-2000:]}")
    record = merged(json.loads(Path(over).read_text()), profiled_rows(ran.stdout.splitlines()))
    env = results.environment(f"python -m gpu.lab.check_slow {path} --over {over}")
    Path(path).write_text(json.dumps({**record, "env": {**record["env"], "slow_calls": env}}, indent=1))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["run"]:
        run()
    elif len(argv) == 3 and argv[1] == "--over":
        measure(argv[0], argv[2])
    else:
        print("usage: python -m gpu.lab.check_slow OUT.json --over MEASURED.json (on a GPU, ncu)")
        sys.exit(0 if argv[:1] in (["--help"], ["-h"]) else 2)


if __name__ == "__main__":
    main()
