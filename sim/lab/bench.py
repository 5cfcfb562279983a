"""`flashsim bench sim` and `bench cli`: the simulator's own speed against plain NumPy, its memory at long sequences,
and the time and memory of the commands the README quotes."""

import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial

import numpy as np

import sim
from sim.algorithms.registry import REGISTRY
from sim.core.dtypes import DTYPES, F


def machine() -> dict:
    """Where the numbers were taken: CPU model, core count, Python and NumPy versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,  # 1, 5, 15 min: others' work
    }


def numpy_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Plain NumPy standard attention in float32: the baseline the simulator is timed against."""
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    s = (q @ k.T) / np.float32(np.sqrt(q.shape[1]))
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)
    return p @ v


def interleaved_medians(calls: dict, repeats: int, advance=None) -> dict[str, float]:
    """The median wall time of each of `calls` (name → function) over `repeats` rounds, each round calling every
    one once in turn (after one warm-up round), so that a change in the machine's load falls on all of them alike;
    `advance(1)` is told of each call done."""
    advance = advance or (lambda units: None)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(repeats + 1):
        for name, fn in calls.items():
            t = time.perf_counter()
            fn()
            if round_:
                times[name].append(time.perf_counter() - t)
            advance(1)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bench_sim_calls(repeats: int, memory_n: int | None) -> int:
    """How many calls `bench_sim` makes (its progress's total): a run of each algorithm to read its blocks, the
    rounds of NumPy's and each algorithm's calls, and the probe."""
    return len(REGISTRY) + (repeats + 1) * (1 + len(REGISTRY)) + bool(memory_n)


def peak_rss() -> int:
    """This process's peak resident memory in bytes: Linux's VmHWM, which starts afresh at exec (getrusage's
    ru_maxrss carries the parent's peak over a fork and exec, so a child started from a big process reads big)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        import resource

        kib = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * kib


_MEMORY_PROBE = """
import sys, time, numpy as np, sim
from sim.lab.bench import peak_rss
from sim.core.dtypes import DTYPES
n, d, dtype = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((n, d)).astype(DTYPES[dtype]) for _ in range(3))
before = peak_rss()
t = time.perf_counter()
r = sim.run("flash2", q, k, v)
seconds = time.perf_counter() - t
print(before, peak_rss(), seconds, r.block_rows, r.block_cols)
"""
_TIMED = """
import atexit, sys
from sim.lab.bench import peak_rss
report, sys.argv = sys.argv[1], ["flashsim", *sys.argv[2:]]
atexit.register(lambda: open(report, "w").write(str(peak_rss())))
from sim.cli import main
main()
"""


def memory_probe(n: int, d: int, dtype: str) -> dict | None:
    """Peak resident memory of a fresh process running full-numerics flash2 at N = n."""
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(n), str(d), dtype], capture_output=True, text=True, check=True
    ).stdout.split()
    before, peak, seconds, Br, Bc = int(out[0]), int(out[1]), float(out[2]), int(out[3]), int(out[4])
    return {
        "n": n,
        "d": d,
        "peak_rss_bytes": peak,
        "rss_before_run_bytes": before,
        "n_by_n_float32_bytes": F * n * n,
        "seconds": seconds,
        "block_rows": Br,
        "block_cols": Bc,
    }


def bench_sim(
    n: int = 4096, d: int = 64, dtype: str = "fp16", repeats: int = 3, memory_n: int | None = 32768, advance=None
) -> dict:
    """Time each registered algorithm's full-numerics run against plain NumPy attention, in interleaved rounds;
    probe flash2's memory.
    `advance(1)` is told of each of the `bench_sim_calls` calls done."""
    advance = advance or (lambda units: None)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d)).astype(DTYPES[dtype]) for _ in range(3))
    blocks = {}
    for algorithm in REGISTRY:
        result = sim.run(algorithm, q, k, v)
        blocks[algorithm] = (result.block_rows, result.block_cols)
        advance(1)
    calls = {"numpy": lambda: numpy_attention(q, k, v)} | {a: partial(sim.run, a, q, k, v) for a in REGISTRY}
    medians = interleaved_medians(calls, repeats, advance)
    baseline = medians["numpy"]
    rows = [
        {"algorithm": a, "seconds": medians[a], "ratio_to_numpy": medians[a] / baseline, "block_rows": blocks[a][0],
         "block_cols": blocks[a][1]}
        for a in REGISTRY
    ]  # fmt: skip
    return {
        "benchmark": "sim",
        "machine": machine(),
        "n": n,
        "d": d,
        "dtype": dtype,
        "repeats": repeats,
        "numpy_seconds": baseline,
        "rows": rows,
        "memory": _probed(memory_n, d, dtype, advance),
    }


def _probed(memory_n: int | None, d: int, dtype: str, advance) -> dict | None:
    """`memory_probe` at memory_n (None: none), then `advance(1)`."""
    if not memory_n:
        return None
    probe = memory_probe(memory_n, d, dtype)
    advance(1)
    return probe


def timed_command(args: list[str], repeats: int = 1) -> dict:
    """Run `flashsim ARGS` in fresh processes, once to warm the disk cache and then `repeats` times: the median wall
    time (Python's start-up included), the largest peak resident memory (`peak_rss`, as the process itself reads
    it at exit) and the exit code."""
    runs = [_timed_once(args) for _ in range(repeats + 1)][1:] if repeats > 1 else [_timed_once(args)]
    return {"command": "flashsim " + " ".join(args), "seconds": statistics.median(r[0] for r in runs),
            "seconds_each": [r[0] for r in runs], "peak_rss_bytes": max(r[1] for r in runs),
            "exit_code": runs[-1][2], "stderr": runs[-1][3]}  # fmt: skip


def _timed_once(args: list[str]) -> tuple[float, int, int, str]:
    """(seconds, peak RSS, exit code, stderr) of one fresh `flashsim ARGS`."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "peak")
        start = time.perf_counter()
        child = subprocess.run([sys.executable, "-c", _TIMED, report, *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
        seconds = time.perf_counter() - start
        with open(report) as f:
            peak = int(f.read())
    return seconds, peak, child.returncode, child.stderr.strip()


RUN_COMMAND = os.path.join(os.path.dirname(sim.__file__), "cli", "run.py")  # whose cached bytecode tells of all
COUNTS_NS = (10**8, 77 * 10**7)  # --counts-only at these N (issue 21: under 0.5 s and 150 MiB each)


def cli_commands(n: int | None, d: int, counts_ns=COUNTS_NS) -> list[list[str]]:
    """The commands `bench_cli` times: a full-numerics flash2 run at N = n (none if n is None), and `--counts-only`
    at each N of counts_ns for every registered algorithm, forward and with --backward."""
    runs = [] if n is None else [["run", "--algo", "flash2", "--n", str(n), "--d", str(d), "--quiet"]]
    for counts_n in counts_ns:
        for a in REGISTRY:
            for backward in ([], ["--backward"]):
                runs.append(["run", "--algo", a, "--n", str(counts_n), "--d", str(d), "--counts-only", *backward])
    return runs


def bench_cli(n: int | None = 32768, d: int = 64, counts_ns=COUNTS_NS, repeats: int = 5, advance=None) -> dict:
    """The commands the README quotes, each in fresh processes (`cli_commands`): the full run once, its time and
    peak memory; each `--counts-only` run the median of `repeats` after a warm-up (`advance(1)` after each
    command). Whether flashsim's bytecode was cached is noted: without it (PYTHONDONTWRITEBYTECODE and no __pycache__)
    every start compiles flashsim's modules again, which a pip install or a first run does once."""
    advance = advance or (lambda units: None)
    rows = [_then(timed_command(args, 1 if "--counts-only" not in args else repeats), advance)
            for args in cli_commands(n, d, counts_ns)]  # fmt: skip
    return {
        "benchmark": "cli",
        "machine": machine(),
        "n": n,
        "d": d,
        "counts_ns": list(counts_ns),
        "repeats": repeats,
        "bytecode_cached": os.path.exists(importlib.util.cache_from_source(RUN_COMMAND)),
        "rows": rows,
    }


def _then(row: dict, advance) -> dict:
    advance(1)
    return row
