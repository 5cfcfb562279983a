"""The listing's Python behind a step (`sim.machine.source.around`), for the operation panel: its file and line, then the
code the step ran."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.machine import source
from sim.machine.trace import Step


def lines_of(step: Step, most: int | None = None) -> list[source.SourceLine]:
    """The lines to show: all of `around(step)` (the `chip.step` call marked); with `most` fewer than that, the
    call's first line and the block it opens (the work), or with one line the work's first."""
    around = source.around(step)
    if most is None or most >= len(around):
        return around
    call = next(n for n, line in enumerate(around) if line.current)
    opened = next((n for n in range(call, len(around)) if around[n].text.rstrip().endswith(":")), call)
    work = around[opened + 1 :]
    return work[:1] if most == 1 else [around[call], *work[: most - 1]]


def code(step: Step, most: int | None = None) -> RenderableType | None:
    """`algorithms/flash2.py:47` and the lines `lines_of` picks, numbered, the current one marked ▶, each on one
    line (cut with … where the panel is narrower); None for a step that names no code (a version 1 trace)."""
    shown = lines_of(step, most)
    if not shown or most == 0:
        return None
    indent = min(len(line.text) - len(line.text.lstrip()) for line in shown if line.text.strip())
    numbers = [("▶ " if line.current else "") + str(line.number) for line in shown]
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", style="dim", no_wrap=True, min_width=max(map(len, numbers)))
    grid.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    for number, line in zip(numbers, shown, strict=True):
        grid.add_row(number, Text(line.text[indent:], style="bold" if line.current else ""))
    file, number = step.code
    return Group(Text(f"{file}:{number}", style="dim italic"), grid)
