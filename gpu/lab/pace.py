"""What sets a public call's pace when it is timed queued (gpu.lab.timing.interleaved_ms, as check_model times issue
22's grid): `python -m gpu.lab.pace OUT.json` (on a GPU).

For each of CASES (issue 22's time misses and their controls), after check_model's second of matmuls, in the same
queued loop as interleaved_ms, in interleaved rounds:
  queued     interleaved_ms's sample itself: `inner` calls between two events; also the host's seconds for those
             calls (perf_counter around the loop, the wait for the end event left out);
  stamped    the same with an event after every call: the GPU's time per call, one by one;
  preloaded  the same behind SPIN's kernel (long enough that every call is queued before the GPU reaches the first):
             the GPU runs the calls back to back with no host pacing them; the host's seconds are then its own alone;
each sample followed by `sm_clock_hz` (the SM clock the GPU ran at just after it: clock64 over the globaltimer)
and beside NVML's SM clock (`Nvml`); then the call captured in a CUDA graph and replayed
(`timing.capture_cupy`, `timing.replay_us`): kernels and the gaps between them, no host. Three passes over the cases:
after a second of matmuls (as check_model), after a second idle, and each case after 0.3 s of matmuls of its own.
"""

import ctypes
import functools
import itertools
import json
import math
import statistics
import sys
import time
from functools import partial
from pathlib import Path

CASES = [  # (direction, rung, d, N, causal, batch); 16 heads
    ("forward", 6, 64, 1024, False, 1),
    ("forward", 6, 64, 1024, True, 1),
    ("forward", 6, 128, 1024, False, 1),
    ("forward", 6, 128, 1024, True, 1),
    ("backward", 7, 64, 1024, False, 1),
    ("backward", 7, 64, 1024, True, 1),
    ("backward", 7, 64, 16384, True, 1),
    ("backward", 7, 64, 16384, False, 1),
]
ROUNDS = 5
SOURCE = r"""
__device__ __forceinline__ long long now() { long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
extern "C" __global__ void spin(long long ns) {  // one thread holds the stream for `ns` nanoseconds
    const long long t0 = now();
    while (now() - t0 < ns) {
    }
}
extern "C" __global__ void clock(long long ns, long long* out) {  // SM cycles and nanoseconds over about `ns`
    const long long t0 = now(), c0 = clock64();
    long long t = t0;
    while (t - t0 < ns) t = now();
    out[0] = clock64() - c0;
    out[1] = t - t0;
}
"""


@functools.cache
def _clock_kernel():
    """SOURCE's `clock` and the two int64 it writes into."""
    from gpu import device

    cupy = device.require()
    return cupy.RawModule(code=SOURCE).get_function("clock"), cupy.zeros(2, cupy.int64)


def sm_clock_hz(window_ns: int = 20_000) -> float:
    """The SM clock the GPU runs at now (after what the current stream has queued): clock64 cycles over
    globaltimer nanoseconds in one thread, over about `window_ns` (the globaltimer ticks in µs steps here: ±~3%
    at 20 µs, read as a median over samples)."""
    from gpu import device

    kernel, out = _clock_kernel()
    kernel((1,), (1,), (device.require().int64(window_ns), out))
    cycles, ns = (int(x) for x in out.get())
    return 1e9 * cycles / ns


class Nvml:
    """The SM clock (MHz), board power (W) and clock-event reasons (NVML's bitmask) of GPU 0, through libnvidia-ml
    by ctypes; None each where NVML is missing."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            self.lib.nvmlInit_v2()
            self.handle = ctypes.c_void_p()
            self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(0), ctypes.byref(self.handle))
        except OSError:
            self.lib = None

    def read(self) -> dict:
        if self.lib is None:
            return {"mhz": None, "watts": None, "reasons": None}
        mhz, mw, reasons = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        self.lib.nvmlDeviceGetClockInfo(self.handle, ctypes.c_int(1), ctypes.byref(mhz))  # NVML_CLOCK_SM
        self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw))
        self.lib.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle, ctypes.byref(reasons))
        return {"mhz": mhz.value, "watts": mw.value / 1e3, "reasons": reasons.value}


class Sampler:
    """interleaved_ms's sample, instrumented (module docstring)."""

    def __init__(self):
        from gpu import device

        self.cupy = cupy = device.require()
        self.spin = cupy.RawModule(code=SOURCE).get_function("spin")
        self.start, self.end = cupy.cuda.Event(), cupy.cuda.Event()
        self.nvml = Nvml()

    def sample(self, fn, inner: int, mode: str, host_guess_s: float = 50e-6) -> dict:
        cupy = self.cupy
        marks = [cupy.cuda.Event() for _ in range(inner)] if mode == "stamped" else []
        if mode == "preloaded":  # the GPU busy for 3× the calls' host time, 2 ms at least
            self.spin((1,), (1,), (cupy.int64(int(max(2e6, 3e9 * inner * host_guess_s))),))
        before = self.nvml.read()
        self.start.record()
        t0 = time.perf_counter()
        for i in range(inner):
            fn()
            if marks:
                marks[i].record()
        t1 = time.perf_counter()
        self.end.record()
        self.end.synchronize()
        hz = sm_clock_hz()
        after = self.nvml.read()
        out = {
            "mode": mode,
            "inner": inner,
            "events_us": 1e3 * cupy.cuda.get_elapsed_time(self.start, self.end) / inner,
            "host_us": 1e6 * (t1 - t0) / inner,
            "gpu_mhz": hz / 1e6,
            "nvml": [before, after],
        }
        if marks:
            edges = [self.start, *marks]
            out["per_call_us"] = [1e3 * cupy.cuda.get_elapsed_time(a, b) for a, b in itertools.pairwise(edges)]
        return out

    def matmuls(self, seconds: float) -> None:
        """check_model's warm-up: fp16 8192² matmuls, synchronized, for `seconds`."""
        a, until = self.cupy.ones((8192, 8192), self.cupy.float16), time.perf_counter() + seconds
        while time.perf_counter() < until:
            a @ a
            self.cupy.cuda.Device().synchronize()


def call_of(case: tuple):
    """The public call of `case` (a zero-argument function) on fp16 inputs made as check_model makes them."""
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_like, random_qkv

    direction, rung, d, n, causal, batch = case
    q, k, v = random_qkv(batch, 16, n, n, d, "float16", seed=0)
    if direction == "forward":
        return partial(flash_attention, q, k, v, causal=causal, kernel=rung)
    o, lse = flash_attention(q, k, v, causal=causal, kernel=6, return_lse=True)
    return partial(flash_attention_backward, q, k, v, o, lse, random_like(q, 1), causal=causal, kernel=rung)


def probe_case(s: Sampler, case: tuple, graph: bool) -> dict:
    """One case: warm-up and `inner` as interleaved_ms picks them, ROUNDS rounds of the three modes, the graph."""
    from gpu.lab import timing

    fn = call_of(case)
    for _ in range(2):
        fn()
    first = s.sample(fn, 1, "queued")
    inner = max(timing.QUEUED_CALLS, min(100, math.ceil(timing.QUEUED_MS / max(first["events_us"] / 1e3, 1e-3))))
    samples, host = [], first["host_us"] * 1e-6
    for _ in range(ROUNDS):
        for mode in ("queued", "stamped", "preloaded"):
            samples.append(s.sample(fn, inner, mode, host))
            host = max(host, samples[-1]["host_us"] * 1e-6)
    out = {"case": case, "first": first, "samples": samples}
    if graph:
        try:
            launch, keep = timing.capture_cupy(fn, 2)
            out["graph_us"] = timing.replay_us({"graph": launch}, torch_stream=False)["graph"]
            del keep
        except Exception as e:  # a call that cannot be captured says so
            out["graph_error"] = f"{type(e).__name__}: {e}"[:300]
    return out


def summary(result: dict) -> dict:
    """Medians by mode: events, host, GPU clock; the stamped calls' spread; the graph's time."""
    out = {}
    for mode in ("queued", "stamped", "preloaded"):
        ss = [x for x in result["samples"] if x["mode"] == mode]
        out[mode] = {k: statistics.median(x[k] for x in ss) for k in ("events_us", "host_us", "gpu_mhz")}
        if mode == "stamped":
            calls = sorted(c for x in ss for c in x["per_call_us"])
            out[mode]["per_call_p10_p50_p90"] = [calls[len(calls) * q // 10] for q in (1, 5, 9)]
    if "graph_us" in result:
        out["graph_us"] = result["graph_us"]
    return out


def main(argv=None) -> None:
    from gpu import device
    from gpu.lab import calibrate, results

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m gpu.lab.pace OUT.json (on a GPU)")
        sys.exit(2)
    try:
        s = Sampler()
    except device.GPUUnavailableError as e:
        sys.exit(f"pace: {e}")
    record = {"kind": "pace", "env": results.environment(f"python -m gpu.lab.pace {args[0]}"), "passes": {}}
    passes = {
        "after matmuls": (CASES, 1.0, 0.0),
        "after idle": (CASES[::-1], 0.0, 0.0),
        "own matmuls": (CASES, 0.0, 0.3),
    }
    for name, (cases, warm, each) in passes.items():
        s.matmuls(warm) if warm else time.sleep(1.0)
        rows = []
        for case in cases:
            if each:
                s.matmuls(each)
            r = probe_case(s, case, graph=name == "after idle")
            rows.append(r)
            print(name, case, json.dumps(summary(r)), flush=True)
        record["passes"][name] = rows
        Path(args[0]).write_text(json.dumps(record))
    record["host_seconds"] = calibrate.host_seconds()
    print("calibrate.host_seconds", record["host_seconds"])
    Path(args[0]).write_text(json.dumps(record))


if __name__ == "__main__":
    main()
