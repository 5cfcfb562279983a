"""Timing with CUDA events (warm-up, median of repeats) and the peak device memory a call allocates."""

import statistics

from gpu import device


def median_ms(fn, *, warmup: int = 2, repeats: int = 10, budget_s: float = 0.5) -> float:
    """Median milliseconds of `fn()` over up to `repeats` timed calls (fewer when a call is slow), after warm-up."""
    cupy = device.require()
    for _ in range(warmup):
        fn()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    while len(times) < repeats and (len(times) < 3 or sum(times) < 1e3 * budget_s):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
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
