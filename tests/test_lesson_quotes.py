"""Numbers the lessons' prose quotes, recomputed from the library: if the code changes, the prose must too.

The lessons print their numbers from code; where a markdown cell quotes one anyway (to make a point
in a sentence), an entry here recomputes the quoted phrase and the test finds it in that lesson's
markdown, word for word.
"""

import nbformat
import pytest
from notebook_runner import LESSONS_DIR

from sim import walkthrough
from sim.dtypes import F

QUOTES: dict[str, list] = {}  # lesson stem -> functions returning a phrase its markdown must contain

QUOTES["04_tiling_walkthrough"] = [
    lambda: f"N = {walkthrough.Q.shape[0]}, block = {walkthrough.BLOCK} walkthrough",  # the title names the example
]
QUOTES["05_counting_bytes"] = [lambda: f"F = {F} bytes the float32 statistics'"]


def _markdown(stem: str) -> str:
    nb = nbformat.read(LESSONS_DIR / f"{stem}.ipynb", as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize(
    "stem, phrase", [(stem, make) for stem, makers in QUOTES.items() for make in makers], ids=lambda x: str(x)[:40]
)
def test_quoted_number_still_holds(stem, phrase):
    assert phrase() in _markdown(stem)
