"""Numbers the lessons' prose quotes, recomputed from the library: if the code changes, the prose must too.

The lessons print their numbers from code; where a markdown cell quotes one anyway (to make a point
in a sentence), an entry here recomputes the quoted phrase and the test finds it in that lesson's
markdown, word for word.
"""

import pytest

nbformat = pytest.importorskip("nbformat", reason="the lessons' tests need the dev extra (nbformat, nbclient)")
pytest.importorskip("nbclient", reason="the lessons' tests need the dev extra (nbformat, nbclient)")
from notebook_runner import LESSONS_DIR

from gpu.lab import bench as gpu_bench
from sim.algorithms import registry
from sim.core.dtypes import F
from sim.lab import walkthrough
from sim.machine import hardware, iomodel
from sim.machine.hardware import KiB

A100 = hardware.get("A100-40GB")


def _fp32_peak_drop() -> str:
    """Lesson 1's "Try it" with fp32: how far the A100's peak falls without tensor cores."""
    return "peak drops more than tenfold" if A100.peak("fp16") > 10 * A100.peak("fp32") else "peak drops"


def _all_memory_bound() -> str:
    """Lesson 1's roofline (one head, N = 4096, d = 64, fp16, A100): standard attention's kernels and both
    FlashAttentions with the blocks `registry.fit` picks are all memory-bound."""
    N, d, s = 4096, 64, 2
    kernels = [c for _, c in iomodel.standard_kernels(N, N, d, s)]
    Br, Bc = registry.fit("flash1", N, N, d, s, A100.sram_bytes)
    kernels.append(iomodel.flash1(N, N, d, s, Bc, Br=Br))
    kernels.append(iomodel.flash2(N, N, d, s, *registry.fit("flash2", N, N, d, s, A100.sram_bytes)))
    bounds = {iomodel.roofline(c, A100, "fp16").bound for c in kernels}
    return "all of them are memory-bound" if bounds == {"memory"} else f"bounds: {bounds}"


def _taller_blocks_cross_the_ridge() -> str:
    """Lesson 1's "Try it": FlashAttention-2 with Br = 256 and the widest Bc that fits is compute-bound."""
    N, d, s = 4096, 64, 2
    Br, Bc = registry.fit("flash2", N, N, d, s, A100.sram_bytes, 256)
    bound = iomodel.roofline(iomodel.flash2(N, N, d, s, Br, Bc), A100, "fp16").bound
    return "its point crosses the ridge" if bound == "compute" else "its point stays left of the ridge"


QUOTES: dict[str, list] = {  # lesson stem -> functions returning a phrase its markdown must contain
    "01_memory_wall": [_fp32_peak_drop, _all_memory_bound, _taller_blocks_cross_the_ridge],
    "02_standard_attention": [lambda: f"F = {F} bytes an element"],
}

QUOTES["04_tiling_walkthrough"] = [
    lambda: f"N = {walkthrough.Q.shape[0]}, block = {walkthrough.BLOCK} walkthrough",  # the title names the example
]
QUOTES["05_counting_bytes"] = [lambda: f"F = {F} bytes the float32 statistics'"]

QUOTES["07_backward_recomputation"] = [
    lambda: (
        f"({hardware.get('H100-SXM').sram_bytes // KiB} KiB of SRAM per thread block instead of "
        f"{hardware.get('A100-40GB').sram_bytes // KiB} KiB)"
    ),
]
QUOTES["08_real_gpu"] = [lambda: f"batch = {gpu_bench.TOKENS}/N and heads = {gpu_bench.HIDDEN}/d"]
QUOTES["10_below_hbm"] = [
    lambda: f"so {hardware.get('H100-SXM').l2_shared_bytes // 2**20} MiB for K and V",
    lambda: f"with the {hardware.get('H100-SXM').sm_count} thread blocks",
    lambda: (
        f"an H100 SM does {hardware.get('H100-SXM').tensor_per_clock['wgmma']} wgmma FLOPs but only "
        f"{hardware.get('H100-SXM').mufu_per_clock} exponentials per clock"
    ),
    lambda: f"moves {hardware.get('H100-SXM').smem_per_clock} of those bytes per clock",
]


def _markdown(stem: str) -> str:
    nb = nbformat.read(LESSONS_DIR / f"{stem}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize(
    "stem, phrase", [(stem, make) for stem, makers in QUOTES.items() for make in makers], ids=lambda x: str(x)[:40]
)
def test_quoted_number_still_holds(stem, phrase):
    assert phrase() in _markdown(stem)
