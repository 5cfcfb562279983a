"""The plain, non-interactive listing of a trace: every step of a small run, one line per tile pair of a big one."""

from rich.console import Group, RenderableType
from rich.text import Text

from sim.core.format import count, exact_bytes, exact_decimal_bytes
from sim.machine.trace import Access
from sim.viz import steps
from sim.viz.panels import traffic_panel
from sim.viz.screen import run_title
from sim.viz.timeline import Timeline

STEPS_LISTED = 300  # traces with more steps are listed one line per tile pair (i, j)


def moved(accesses: list[Access]) -> str:
    """The tensors a group of steps moved and their bytes: `K V 32,768 B` (L2 re-reads not counted)."""
    hbm = [a for a in accesses if a.level == "hbm"]
    if not hbm:
        return "—"
    names = " ".join(dict.fromkeys(a.tensor for a in hbm))
    return f"{names} {exact_decimal_bytes(sum(a.nbytes for a in hbm))}"


def span(first: int, last: int) -> str:
    """`3` or `3–8`."""
    return str(first) if first == last else f"{first}–{last}"


def tile_lines(timeline: Timeline) -> Text:
    """One line per run of steps on one tile pair: its steps, i, j, the paper's lines, bytes moved, SRAM peak.

    Where an algorithm has several kernels (standard attention, the backward passes), each
    kernel's lines follow a line that names it.
    """
    rows: list[tuple | str] = [("steps", "i", "j", "lines", "HBM → SRAM", "SRAM → HBM", "SRAM peak")]
    phase = None
    for first, last in timeline.tile_groups():
        group = timeline.steps[first : last + 1]
        lines = [s.line for s in group if s.line is not None]
        where = group[0]
        if where.phase != phase and where.phase:
            rows.append(f"kernel {where.phase}")
        phase = where.phase
        rows.append(
            (
                span(first, last),
                "" if where.i is None else str(where.i),
                "" if where.j is None else str(where.j),
                span(min(lines), max(lines)) if lines else "",
                moved([a for s in group for a in s.reads]),
                moved([a for s in group for a in s.writes]),
                exact_bytes(max(s.sram_bytes for s in group)),
            )
        )
    table = [r for r in rows if isinstance(r, tuple)]
    widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
    right = {1, 2, 6}

    def line(row) -> str:
        if isinstance(row, str):
            return row
        cells = (c.rjust(w) if n in right else c.ljust(w) for n, (c, w) in enumerate(zip(row, widths, strict=True)))
        return "  ".join(cells).rstrip()

    return Text("\n".join(line(row) for row in rows))


def listing(timeline: Timeline, width: int = 80) -> RenderableType:
    """The whole run as plain text: each step (small runs) or each tile pair (big runs), then the traffic."""
    n = len(timeline)
    if n <= STEPS_LISTED:
        body = steps.listing(timeline.trace)
        about = f"{count(n)} steps, one paragraph each."
    else:
        body = tile_lines(timeline)
        about = f"{count(n)} steps, summarized in {count(len(timeline.tile_groups()))} lines: one per run of steps on a tile pair (i, j)."
    title = Text.assemble(("flashsim trace ", "bold"), run_title(timeline))
    return Group(title, Text(about, style="dim"), Text(""), body, traffic_panel(timeline, n - 1, width))
