"""`python -m gpu.lab.racecheck_probe`: what compute-sanitizer's racecheck reports for an SRAM hand-off ordered eight
ways (gpu/kernels/racecheck_probe.cu): none (a race); an mbarrier every reader arrives on; the readers meeting at a
bar.sync before one of them arrives; a named barrier the readers arrive at and the writer waits at; each warp
meeting (bar.warp.sync) before its lane 0 arrives; each warp's lane 0 alone reading, shuffling to its warp, then
arriving; and the bar.sync and every-reader orders before a bulk copy (rung 7's stage refill) instead of a store.

Each build runs once in its own process under `compute-sanitizer --tool racecheck`; the table gives racecheck's
reports beside whether the order is a race (gpu/NOTES.md run 43: the orders it follows here, and rung 6's ring; 06's
header).
"""

import re
import shutil
import subprocess
import sys

from gpu import device, geometry, registry, source

WAYS = {
    0: ("none", True),
    1: ("mbarrier, every reader arrives", False),
    2: ("bar.sync, then one arrives", False),
    3: ("named barrier arrive → sync", False),
    4: ("bar.warp.sync, lane 0s arrive", False),
    5: ("lane 0s read, shuffle, arrive", False),
    6: ("bar.sync, one arrives; bulk copy", False),
    7: ("every reader arrives; bulk copy", False),
}


def launch(handoff: int) -> list[int]:
    """One launch of the build `handoff`: the 128 consumers' reads (16 each: the first write's value × 1)."""
    cupy = device.require()
    spec = registry.HELPERS["racecheck_probe"]
    out = cupy.asarray([-7] * 128 + [0, -1, 0, 0], cupy.int32)  # the consumers' reads, then the bulk copies' source
    source.function(spec, geometry.handoff_defines(64, "float16", handoff=handoff))((1,), (256,), (out,))
    return out[:128].get().tolist()


def hazards(handoff: int) -> tuple[int, str]:
    """(racecheck's error count, its summary line) for the build `handoff`, run in a child process."""
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    command = [sanitizer, "--tool", "racecheck", "--racecheck-report", "all"]
    command += [sys.executable, "-m", "gpu.lab.racecheck_probe", "--launch", str(handoff)]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    summary = next((line for line in run.stdout.splitlines() if "RACECHECK SUMMARY" in line), "")
    errors = re.search(r"\((\d+) errors", summary) or re.search(r"(\d+) hazards?", summary)
    if run.returncode != 0 or "probe reads" not in run.stdout:
        raise SystemExit(
            f"racecheck of build {handoff} failed (rc {run.returncode}): {run.stdout[-400:]}{run.stderr[-400:]}"
        )
    return (int(errors.group(1)) if errors else 0), summary.strip("= ")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--launch"]:
        reads = launch(int(argv[1]))
        print(f"probe reads {sorted(set(reads))}")
        return
    print(f"{'hand-off':32s} {'a race?':8s} racecheck")
    for handoff, (way, race) in WAYS.items():
        count, summary = hazards(handoff)
        print(f"{way:32s} {'yes' if race else 'no':8s} {count} ({summary or 'no summary: 0 hazards'})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
