"""The machine model's prediction (DRAM bytes, time, bound) for a GPU rung, from its launch geometry."""

from gpu.registry import KernelSpec
from sim import hardware
from sim.machine.launch import Launch, capped_registers
from sim.machine.prediction import Prediction, predict


def launch_of(spec: KernelSpec, d: int) -> Launch:
    """Rung `spec`'s launch at head dim d: threads, shared memory, the register cap its __launch_bounds__ sets
    (rung 6: the cap for its threads at one block per SM), its matmul instruction and its shared-memory rows."""
    tiles = spec.default_tiles(d)
    instruction = "wgmma" if spec.tma else ("mma.sync" if spec.tensor_cores else "fma")
    return Launch(
        threads=tiles.threads,
        smem_bytes=spec.smem(d, tiles),
        registers=capped_registers(tiles.threads, tiles.min_blocks),
        instruction=instruction,
        padded_rows=spec.tensor_cores and not spec.tma and not tiles.swizzle,
    )


def rung_prediction(spec: KernelSpec, hw: hardware.Hardware, *, n, nk, d, batch, heads, s, causal) -> Prediction:
    """The prediction for rung `spec` (forward or backward) on one shape, with the rung's own blocks."""
    tiles = spec.default_tiles(d)
    return predict(
        "flash2", n, nk, d, s, tiles.block_rows, tiles.block_cols, causal, batch * heads, hw, launch_of(spec, d),
        backward=spec.direction == "backward",
    )  # fmt: skip
