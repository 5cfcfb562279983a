"""The four panels of the trace viewer, each a pure function of (timeline, step) returning a rich renderable."""

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sim.core.format import count, exact_bytes, exact_decimal_bytes, more_or_fewer, percent, short_time
from sim.machine.trace import Access
from sim.viz.code import code
from sim.viz.steps import moves, tile
from sim.viz.timeline import EMPTY, READ, RESIDENT, WRITTEN, Timeline, key_rows

GLYPHS = {
    EMPTY: ("·", "dim"),
    RESIDENT: ("■", "bold green"),
    READ: ("R", "bold black on cyan"),
    WRITTEN: ("W", "bold white on magenta"),
}
LEGEND = ((RESIDENT, "in SRAM"), (READ, "just read"), (WRITTEN, "just written"), (EMPTY, "HBM only"))
# -- memory hierarchy ---------------------------------------------------------------------


def cells(grid_row) -> Text:
    """One row of tile states as glyphs: `R · ■`."""
    text = Text()
    for n, state in enumerate(grid_row):
        glyph, style = GLYPHS[int(state)]
        text.append(glyph, style)
        if n < len(grid_row) - 1:
            text.append(" ")
    return text


def hbm_grids(timeline: Timeline, k: int, width: int, max_rows: int = 8) -> RenderableType:
    """Every HBM tensor as its grid of tiles: a block of rows is one cell, S and P are Br × Bc tiles.

    Grids too big for `width` merge neighbouring tiles into one cell, which shows the
    highest state among them (written, then read, then in SRAM).
    """
    shapes = {t: "×".join(map(str, timeline.trace.hbm[t]["shape"])) for t in timeline.tensors}
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(no_wrap=True)
    room = max(4, (width - 3 - max(map(len, timeline.tensors)) - max(map(len, shapes.values()))) // 2)
    notes: dict[str, list[str]] = {}  # how many tiles a cell holds -> the tensors whose grids merge that many
    for tensor in timeline.tensors:
        if timeline.grid_shape(tensor)[1] == 1:  # row blocks, drawn across: cell i holds rows i·B … (i+1)·B − 1
            states, merged, _ = timeline.tile_states(k, tensor, room, 1)
            grid.add_row(tensor, shapes[tensor], cells(states[:, 0]))
            if merged > 1:
                notes.setdefault(f"{merged} row blocks", []).append(tensor)
        else:
            states, gr, gc = timeline.tile_states(k, tensor, max_rows, room)
            grid.add_row(tensor, shapes[tensor], Text("\n").join(cells(row) for row in states))
            if gr * gc > 1:
                notes.setdefault(f"{gr} × {gc} tiles", []).append(tensor)
    if not notes:
        return grid
    merged = "; ".join(f"{what} ({', '.join(tensors)})" for what, tensors in notes.items())
    return Group(grid, Text(f"a cell is {merged}", style="dim"))


def legend() -> Text:
    """What the tile glyphs mean."""
    text = Text()
    for n, (state, meaning) in enumerate(LEGEND):
        glyph, style = GLYPHS[state]
        text.append(glyph, style)
        text.append(f" {meaning}" + ("  " if n < len(LEGEND) - 1 else ""), "dim")
    return text


def occupancy_bar(used: int, peak: int, capacity: int, width: int) -> Text:
    """█ in use now, ▒ the peak so far beyond it, ░ free."""
    now = min(width, round(width * used / capacity))  # (a loaded trace's counts are checked; the bar holds anyway)
    high = min(width, max(now, round(width * peak / capacity)))
    return Text.assemble(("█" * now, "green"), ("▒" * (high - now), "yellow"), ("░" * (width - high), "dim"))


def origin(source: Access | None, hbm: dict) -> str:
    """Where a resident buffer came from: `← K[0:2]`, or computed on chip."""
    if source is None:
        return "on chip"
    shape = hbm.get(source.tensor, {}).get("shape", [])
    return "← " + tile(source, shape[1] if len(shape) == 2 else None)


def sram_section(timeline: Timeline, k: int, width: int, compact: bool = False) -> RenderableType:
    """The occupancy bar, what its glyphs stand for with used/capacity and peak so far, then each resident buffer
    (with where it came from; `compact`: names and sizes in a paragraph)."""
    step, cap = timeline.steps[k], timeline.sram_capacity
    used, peak = step.sram_bytes, timeline.peak(k)
    numbers = Text.assemble(
        ("█", "green"), f"{' SRAM' * compact} {exact_bytes(used)} of {exact_bytes(cap)} ({percent(used, cap)}) · ",
        ("▒", "yellow"), f" peak so far {exact_bytes(peak)}",
    )  # fmt: skip
    bar = occupancy_bar(used, peak, cap, max(10, min(48, width - 4)))
    if compact:
        entries = [f"{r.name} {exact_bytes(r.nbytes)}" for r in step.sram]
        return Group(bar, numbers, Text(" · ".join(entries) or "(empty)", style="" if entries else "dim"))
    per_line = max(1, width // 34)  # resident buffers side by side where the panel is wide
    residents = Table.grid(padding=(0, 1))
    for _ in range(per_line):
        residents.add_column(no_wrap=True)
        residents.add_column(justify="right", no_wrap=True)
        residents.add_column(style="dim", no_wrap=True)
    entries = [(r.name, exact_bytes(r.nbytes), origin(r.source, timeline.trace.hbm) + "  ") for r in step.sram]
    for n in range(0, len(entries), per_line):
        row = [cell for entry in entries[n : n + per_line] for cell in entry]
        residents.add_row(*row, *[""] * (3 * per_line - len(row)))
    if not entries:
        residents.add_row(Text("(empty)", style="dim"), *[""] * (3 * per_line - 1))
    return Group(bar, numbers, residents)


def memory_panel(timeline: Timeline, k: int, width: int = 60, compact: bool = False) -> Panel:
    """HBM tensors as tile grids (tiles in SRAM highlighted, just read/written marked) and the SRAM bar;
    `compact` (a short terminal): no headings, S and P in at most 4 rows of cells, the buffers in a paragraph."""
    inner = width - 4
    grids, sram = hbm_grids(timeline, k, inner, 4 if compact else 8), sram_section(timeline, k, inner, compact)
    if compact:  # no headings: the legend names HBM, the numbers SRAM
        body = Group(grids, legend(), sram)
    else:
        body = Group(Text("HBM", "bold underline"), grids, legend(), Text(""), Text("SRAM", "bold underline"), sram)
    return Panel(body, title="Memory hierarchy", title_align="left", width=width)


# -- operation ----------------------------------------------------------------------------


def paper_line(timeline: Timeline, k: int) -> str:
    """`Algorithm 1, line 10`: the line of the paper's listing the step executes."""
    step = timeline.steps[k]
    return f"{timeline.listing}, line {step.line}" if step.line is not None else timeline.listing


def where(timeline: Timeline, k: int, short: bool = False) -> str:
    """`i = 0 (query rows 0:2) · j = 1 (key rows 2:4)`; `short`: `i = 0 (rows 0:2) · j = 1 (keys 2:4)`."""
    step = timeline.steps[k]
    parts = []
    if step.i is not None:
        rows = f" ({'rows' if short else 'query rows'} {step.rows[0]}:{step.rows[1]})" if step.rows else ""
        parts.append(f"i = {step.i}{rows}")
    keys = key_rows(step, timeline.block_cols, timeline.nk)
    if keys:
        parts.append(f"j = {step.j} ({'keys' if short else 'key rows'} {keys[0]}:{keys[1]})")
    return " · ".join(parts) or "no tile indices"


def operation_panel(timeline: Timeline, k: int, width: int = 60, code_lines: int | None = None) -> Panel:
    """The paper's line being executed, its tile indices, the tiles it moved, and the listing's Python that ran it
    (`sim.machine.source.around`: all of it, or with `code_lines` the first lines of the work, for a short terminal,
    which also shortens the labels and leaves out a direction that moved nothing)."""
    step = timeline.steps[k]
    short = code_lines is not None
    info = Table.grid(padding=(0, 1))
    info.add_column(style="cyan", no_wrap=True)
    info.add_column()
    info.add_row("tile", where(timeline, k, short))
    if step.phase:
        info.add_row("kernel", step.phase)
    directions = (("read", step.reads), ("wrote", step.writes)) if short else (
        ("HBM → SRAM", step.reads), ("SRAM → HBM", step.writes))  # fmt: skip
    for label, accesses in directions:
        if accesses or not short:
            info.add_row(label, moves(accesses, timeline.trace.hbm) or "—")
    title = Text.assemble((paper_line(timeline, k), "bold"), f": {step.text}")
    listing = code(step, code_lines)
    body = Group(title, info, *([] if listing is None else [listing]))
    return Panel(body, title=f"Operation · {timeline.algorithm_name}", title_align="left", width=width)


# -- traffic ------------------------------------------------------------------------------


def traffic_panel(timeline: Timeline, k: int, width: int = 60, compact: bool = False, machine: bool = True) -> Panel:
    """HBM bytes so far per tensor, against the closed-form total and the contrasting algorithm's, and (`machine`)
    below HBM as `flashsim run` shows it: DRAM bytes, time and bound; `compact` (a short terminal): the totals alone."""
    traffic = timeline.traffic(k)
    l2 = any(t[2] for t in timeline.traffic(len(timeline) - 1).values())
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    table.add_column("HBM so far", no_wrap=True)
    table.add_column("read", justify="right", no_wrap=True)
    table.add_column("written", justify="right", no_wrap=True)
    if l2 and not compact:
        table.add_column("L2 re-read", justify="right", no_wrap=True)
    if not compact:
        for tensor, (read, written, cached) in traffic.items():
            table.add_row(tensor, *map(exact_decimal_bytes, (read, written, *([cached] if l2 else []))))
    step = timeline.steps[k]
    table.add_row(
        Text("total", style="bold"),
        exact_decimal_bytes(step.hbm_read_bytes),
        exact_decimal_bytes(step.hbm_write_bytes),
        end_section=not compact,
    )
    closed = timeline.closed_form()
    label, other = timeline.contrast()
    table.add_row("closed form", *map(exact_decimal_bytes, (closed.hbm_read_bytes, closed.hbm_write_bytes)))
    shown = label.removesuffix(" backward").replace(" attention", "") if compact else label  # `standard`
    table.add_row(shown, *map(exact_decimal_bytes, (other.hbm_read_bytes, other.hbm_write_bytes)), style="dim")
    predicted = timeline.prediction() if machine and not compact else None
    if predicted is not None:  # the whole run below HBM, as `flashsim run` shows it (sim.machine)
        written = predicted.dram_write_bytes + predicted.left_dirty_bytes
        table.add_row("DRAM, predicted", *map(exact_decimal_bytes, (predicted.dram_read_bytes, written)), style="dim")
    done = step.hbm_read_bytes + step.hbm_write_bytes
    if not (closed.hbm_bytes and other.hbm_bytes):  # a loaded trace's closed form of 0 (red team 87)
        compared, so_far = "another number of", "—"
    else:
        compared, so_far = more_or_fewer(other.hbm_bytes / closed.hbm_bytes, 2), percent(done, closed.hbm_bytes)
    if compact:
        title = f"Traffic · {so_far} of the closed form so far"
        return Panel(table, title=title, title_align="left", width=width)
    notes = Text(
        f"closed form: the whole run's bytes (sim.machine.iomodel); {label} moves {compared} bytes. "
        f"Moved so far: {so_far}; matmul FLOPs so far: {count(step.flops)}.",
        style="dim",
    )
    if l2:
        notes.append(" L2 re-reads are free in Theorem 2's count.", style="dim")
    title = "Traffic"
    if predicted is not None:  # sim.machine's time for the whole run, with the unit that bounds it
        title += f" · predicted {short_time(predicted.seconds)} on {predicted.hardware}, bound: {predicted.bound}"
    return Panel(Group(table, notes), title=title, title_align="left", width=width)
