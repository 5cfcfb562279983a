"""The listing's Python behind a step (`sim.machine.source.around`), for the operation panel: its file and line, then the
code the step ran."""

from rich.console import Group, RenderableType
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
    """`algorithms/flash2.py:47` and the lines `lines_of` picks, numbered, the step's work marked ▶ and its
    `chip.step` call dimmed, each on one line (cut with … where the panel is narrower); None for a step that
    names no code (a version 1 trace)."""
    shown = lines_of(step, most)
    if not shown or most == 0:
        return None
    indent = min(len(line.text) - len(line.text.lstrip()) for line in shown if line.text.strip())
    # the `with chip.step(…):` call only names the paper's line: dim; the block it opens is the work: ▶ and bold
    call = next((n for n, line in enumerate(shown) if line.current), len(shown))
    opened = next((n for n in range(call, len(shown)) if shown[n].text.rstrip().endswith(":")), call)
    work = opened + 1 if opened + 1 < len(shown) else call
    marks = ["▶ " if n == work else "" for n in range(len(shown))]
    styles = [
        "dim" if call <= n <= opened and n != work else "bold" if n >= work > call else "" for n in range(len(shown))
    ]
    numbers = [mark + str(line.number) for mark, line in zip(marks, shown, strict=True)]
    wide = max(map(len, numbers))  # each line one Text, cut by itself: a grid's columns lose the … (rich 15)
    rows = [
        Text.assemble((number.rjust(wide), "dim"), " ", (line.text[indent:], style), no_wrap=True, overflow="ellipsis")
        for number, line, style in zip(numbers, shown, styles, strict=True)
    ]
    file, number = step.code
    return Group(Text(f"{file}:{number}", style="dim italic"), *rows)
