"""Numbers the lessons' prose quotes, recomputed from the library: if the code changes, the prose must too.

The lessons print their numbers from code; where a markdown cell quotes one anyway (to make a point
in a sentence), an entry here recomputes the quoted phrase and the test finds it in that lesson's
markdown, word for word.
"""

import nbformat
import pytest
from notebook_runner import LESSONS_DIR

from gpu import bench as gpu_bench
from sim import hardware
from sim.hardware import KiB

QUOTES: dict[str, list] = {}  # lesson stem -> functions returning a phrase its markdown must contain

QUOTES["07_backward_recomputation"] = [
    lambda: (
        f"({hardware.get('H100-SXM').sram_bytes // KiB} KiB of SRAM per thread block instead of "
        f"{hardware.get('A100-40GB').sram_bytes // KiB} KiB)"
    ),
]
QUOTES["08_real_gpu"] = [lambda: f"batch = {gpu_bench.TOKENS}/N and heads = {gpu_bench.HIDDEN}/d"]


def _markdown(stem: str) -> str:
    nb = nbformat.read(LESSONS_DIR / f"{stem}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize(
    "stem, phrase", [(stem, make) for stem, makers in QUOTES.items() for make in makers], ids=lambda x: str(x)[:40]
)
def test_quoted_number_still_holds(stem, phrase):
    assert phrase() in _markdown(stem)
