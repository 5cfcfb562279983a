"""How fast the viewer opens a big run and answers a key (what `flashsim bench trace` reports)."""

import io
import time

import numpy as np
from rich.console import Console

from sim.algorithms.registry import REGISTRY
from sim.core.dtypes import DTYPES
from sim.viewer.keys import Viewer
from sim.viewer.traces import record
from sim.viz.screen import KEYS, screen
from sim.viz.timeline import Timeline


def bench_open(algorithms=tuple(REGISTRY), *, n=4096, d=64, dtype="fp16", hardware="A100-40GB", keys=50) -> list[dict]:
    """Per algorithm on an n × n run: seconds to record the trace and draw its first screen (120 × 45),
    and the mean seconds per key press (`→`, a new screen each) after that."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d)).astype(DTYPES[dtype]) for _ in range(3))
    console = Console(file=io.StringIO(), width=120, height=45, force_terminal=True)
    rows = []
    for algorithm in algorithms:
        start = time.perf_counter()
        trace = record(algorithm, q, k, v, hardware=hardware)
        recorded = time.perf_counter()
        view = Timeline(trace)
        console.print(screen(view, 0, KEYS, height=45))
        opened = time.perf_counter()
        viewer = Viewer(view)
        for _ in range(keys):
            viewer.press("right")
            console.print(screen(view, viewer.k, viewer.footer, height=45))
        rows.append(
            {
                "algorithm": algorithm, "n": n, "d": d, "dtype": dtype, "hardware": hardware, "steps": len(view),
                "record_s": recorded - start, "open_s": opened - start,
                "per_key_s": (time.perf_counter() - opened) / keys,
            }
        )  # fmt: skip
    return rows
