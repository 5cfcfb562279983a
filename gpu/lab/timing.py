"""Timing with CUDA events (warm-up, median of repeats), of calls or of CUDA graphs captured from them, and the peak
device memory a call allocates."""

import math
import statistics
import time

from gpu import device

SAMPLE_MS = 2.0  # a timed sample runs `fn` back to back until about this long, so host overhead hides behind the GPU
QUEUED_MS, QUEUED_CALLS = 10.0, 3  # interleaved_ms: samples of at least this long and this many calls
STEPS, REPLAYS = 24, 15  # graphs: calls captured in one graph; interleaved replays of each, the median reported


def median_ms(fn, *, warmup: int = 2, repeats: int = 10, budget_s: float = 0.5) -> float:
    """Median milliseconds per call of `fn()` over up to `repeats` samples (fewer when calls are slow), after warm-up.

    A sample is `inner` calls between two events, `inner` chosen so that a sample lasts about SAMPLE_MS:
    short kernels are then timed back to back, as they run in a model, not with the launch gap of one call.
    """
    cupy = device.require()
    for _ in range(warmup):
        fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()

    def sample(inner: int) -> float:
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / inner

    first = sample(1)
    inner = max(1, min(100, math.ceil(SAMPLE_MS / max(first, 1e-3))))
    times = []
    while len(times) < repeats and (len(times) < 3 or sum(times) * inner < 1e3 * budget_s):
        times.append(sample(inner))
    return statistics.median(times)


def peak_extra_bytes(fn) -> int:
    """The most device memory `fn()` held at once beyond what was allocated before it (CuPy's pool)."""
    cupy = device.require()

    class _Peak(cupy.cuda.MemoryHook):
        name = "flashsim-peak"

        def __init__(self):
            self.now = self.peak = 0

        def malloc_postprocess(self, **kw):
            self.now += kw["mem_size"]
            self.peak = max(self.peak, self.now)

        def free_postprocess(self, **kw):
            self.now -= kw["mem_size"]

    hook = _Peak()
    with hook:
        fn()
        cupy.cuda.Device().synchronize()
    return hook.peak


def interleaved_ms(
    calls: dict, *, warmup: int = 2, rounds: int = 7, budget_s: float = 1.5, after=None
) -> dict[str, float]:
    """Median milliseconds per call of each `calls[name]()`, timed in interleaved rounds (one sample of each per
    round, in turn), so that a drift in clocks or temperature during the run touches every implementation alike.

    A sample is `inner` back-to-back calls between two events, at least QUEUED_CALLS of them and QUEUED_MS long:
    the host's work for one call then overlaps the GPU's work for the one before, as in a training loop (a single
    call on an idle GPU also pays its host latency: `python -m gpu.autograd_tax` measures that apart). At least 3
    rounds, then rounds until `rounds` or until `budget_s` seconds of samples. `after(name, ms, host_seconds)`, if
    given, is called after each timed sample with its ms per call and the host's seconds per call queuing it
    (perf_counter around the calls, the wait for the end event left out): gpu.lab.check_model records the host's
    pace in the loop that set the events' (gpu.lab.pace, gpu/NOTES.md run 42-pace15)."""
    cupy = device.require()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    host = [0.0]  # the last sample's host seconds per call

    def sample(fn, inner: int) -> float:
        start.record()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        host[0] = (time.perf_counter() - t0) / inner
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / inner

    inner = {}
    for name, fn in calls.items():
        for _ in range(warmup):
            fn()
        inner[name] = max(QUEUED_CALLS, min(100, math.ceil(QUEUED_MS / max(sample(fn, 1), 1e-3))))
    times = {name: [] for name in calls}
    spent = 0.0
    for r in range(rounds):
        if r >= 3 and spent > 1e3 * budget_s:
            break
        for name, fn in calls.items():
            ms = sample(fn, inner[name])
            times[name].append(ms)
            if after is not None:
                after(name, ms, host[0])
            spent += ms * inner[name]
    return {name: statistics.median(t) for name, t in times.items()}


def capture_cupy(fn, warmup: int):
    """fn() STEPS times, captured on a fresh CuPy stream after `warmup` calls there (workspaces made, kernels
    compiled): (a launcher taking the stream to replay on, what must stay alive: the graph, its stream, the outputs)."""
    cupy = device.require()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(warmup):
            fn()
        stream.synchronize()
        stream.begin_capture()
        try:
            outs = [fn() for _ in range(STEPS)]
        finally:
            graph = stream.end_capture()
    return (lambda s: graph.launch(s)), (graph, stream, outs)


def capture_torch(fn, warmup: int):
    """fn() STEPS times, captured by torch.cuda.graph (its private memory pool) after `warmup` calls on a side stream,
    as PyTorch's documentation warms a graph up: (a launcher replaying it on torch's current stream, the graph and
    its outputs)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [fn() for _ in range(STEPS)]
    return (lambda s: graph.replay()), (graph, outs)


def replay_us(launchers: dict, *, torch_stream: bool) -> dict[str, float]:
    """Median µs per captured call of each graph (`launchers[name](stream)` replays one), its replays interleaved with
    the others' (REPLAYS rounds, after two), all on torch's current stream (where a torch graph replays) when
    `torch_stream`, else on CuPy's: the GPU's time per call, its kernels and the gaps between them, no host."""
    cupy = device.require()
    if torch_stream:
        import torch

        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    else:
        stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = {name: [] for name in launchers}
    for r in range(REPLAYS + 2):
        for name, launch in launchers.items():
            start.record(stream)
            launch(stream)
            end.record(stream)
            end.synchronize()
            if r >= 2:
                times[name].append(1e3 * cupy.cuda.get_elapsed_time(start, end) / STEPS)
    return {name: statistics.median(t) for name, t in times.items()}
