"""The grid `python -m gpu.lab.check_model` measures (issue 22's) and the public calls it profiles on each shape."""

GRID = [
    {"d": d, "n": n, "causal": causal, "batch": batch, "heads": 16}
    for d in (64, 128)
    for n in (1024, 4096, 16384)
    for causal in (False, True)
    for batch in (1, 8)
]
FORWARD_RUNGS, BACKWARD_RUNGS = (1, 2, 3, 6), (5, 7)
TIMED = {"forward": (6,), "backward": (5, 7)}  # the public calls timed with CUDA events
SLOW = {1: 4096}  # rung → the largest N it is profiled at (rung 1 runs at ~3 TFLOP/s)


def calls(g: dict) -> list[tuple[str, int]]:
    """(direction, rung) of each public call one shape makes under ncu, in launch order; the last forward (rung 6)
    makes the O and L the backward calls read."""
    forward = [("forward", r) for r in FORWARD_RUNGS if g["n"] <= SLOW.get(r, g["n"])]
    return forward + [("backward", r) for r in BACKWARD_RUNGS]


def launched(direction: str, rung: int) -> list[str]:
    """The CUDA functions one public call launches, in order."""
    from gpu import registry

    if direction == "forward":
        return [registry.FORWARD[rung].function]
    helpers = registry.HELPERS
    return [helpers["bwd_prepass"].function, registry.BACKWARD[rung].function, helpers["bwd_dq"].function]
