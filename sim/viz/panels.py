"""The four panels of the trace viewer, each a pure function of (timeline, step) returning a rich renderable."""

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sim.format import count, exact_bytes, number, percent, ratio
from sim.trace import Access
from sim.viz.steps import moves, tile
from sim.viz.timeline import EMPTY, READ, RESIDENT, WRITTEN, Timeline, key_rows

GLYPHS = {
    EMPTY: ("·", "dim"),
    RESIDENT: ("■", "bold green"),
    READ: ("R", "bold black on cyan"),
    WRITTEN: ("W", "bold white on magenta"),
}
LEGEND = ((RESIDENT, "in SRAM"), (READ, "just read"), (WRITTEN, "just written"), (EMPTY, "HBM only"))
NOTES = {
    "α_i": "rescale of the old O_i, ℓ_i: e^(m_old − m_new)",
    "β_i": "rescale of this block: e^(m̃_ij − m_new)",
    "m_new": "the new running max",
}
MAX_ROWS = 6  # rows of a matrix the values panel shows before eliding


def matrix(values, room: int = 80, max_rows: int = MAX_ROWS) -> str:
    """A scalar, vector or matrix as aligned text in at most `room` columns, elided with … where it does not fit."""
    if not isinstance(values, list):
        return number(values)
    rows = values if values and isinstance(values[0], list) else [values]
    cells = [[number(x) for x in row] for row in rows[:max_rows]]
    width = max((len(c) for row in cells for c in row), default=0)
    total = max(map(len, cells), default=0)
    shown = total if 2 + total * (width + 2) - 2 <= room else max(1, (room - 5) // (width + 2))
    lines = [
        "[" + "  ".join(c.rjust(width) for c in row[:shown]) + ("  …" if len(row) > shown else "") + "]"
        for row in cells
    ]
    if len(rows) > max_rows:
        lines.append(f"… {len(rows)} rows")
    return "\n".join(lines)


def fits(values, room: int) -> bool:
    """Whether `matrix` shows every column of `values` in `room` columns."""
    return "…" not in matrix(values, room, max_rows=1).split("\n")[0]


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


def hbm_grids(timeline: Timeline, k: int, width: int) -> RenderableType:
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
            states, gr, gc = timeline.tile_states(k, tensor, 8, room)
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
    now = round(width * used / capacity)
    high = max(now, round(width * peak / capacity))
    return Text.assemble(("█" * now, "green"), ("▒" * (high - now), "yellow"), ("░" * (width - high), "dim"))


def origin(source: Access | None, hbm: dict) -> str:
    """Where a resident buffer came from: `← K[0:2]`, or computed on chip."""
    if source is None:
        return "on chip"
    shape = hbm.get(source.tensor, {}).get("shape", [])
    return "← " + tile(source, shape[1] if len(shape) == 2 else None)


def sram_section(timeline: Timeline, k: int, width: int) -> RenderableType:
    """The occupancy bar with used/capacity and peak so far, then each resident buffer."""
    step, cap = timeline.steps[k], timeline.sram_capacity
    used, peak = step.sram_bytes, timeline.peak(k)
    numbers = Text(
        f"{exact_bytes(used)} of {exact_bytes(cap)} ({percent(used, cap)}) · peak so far {exact_bytes(peak)}"
    )
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
    return Group(occupancy_bar(used, peak, cap, max(10, min(48, width - 4))), numbers, residents)


def memory_panel(timeline: Timeline, k: int, width: int = 60) -> Panel:
    """HBM tensors as tile grids (tiles in SRAM highlighted, just read/written marked) and the SRAM bar."""
    inner = width - 4
    body = Group(
        Text("HBM", style="bold underline"),
        hbm_grids(timeline, k, inner),
        legend(),
        Text(""),
        Text("SRAM", style="bold underline"),
        sram_section(timeline, k, inner),
    )
    return Panel(body, title="Memory hierarchy", title_align="left", width=width)


# -- operation ----------------------------------------------------------------------------


def paper_line(timeline: Timeline, k: int) -> str:
    """`Algorithm 1, line 10`: the line of the paper's listing the step executes."""
    step = timeline.steps[k]
    return f"{timeline.listing}, line {step.line}" if step.line is not None else timeline.listing


def where(timeline: Timeline, k: int) -> str:
    """`i = 0 (query rows 0:2) · j = 1 (key rows 2:4)`."""
    step = timeline.steps[k]
    parts = []
    if step.i is not None:
        rows = f" (query rows {step.rows[0]}:{step.rows[1]})" if step.rows else ""
        parts.append(f"i = {step.i}{rows}")
    keys = key_rows(step, timeline.block_cols, timeline.nk)
    if keys:
        parts.append(f"j = {step.j} (key rows {keys[0]}:{keys[1]})")
    return " · ".join(parts) or "no tile indices"


def operation_panel(timeline: Timeline, k: int, width: int = 60) -> Panel:
    """The paper's line being executed, its tile indices, and the tiles it moved."""
    step = timeline.steps[k]
    info = Table.grid(padding=(0, 1))
    info.add_column(style="cyan", no_wrap=True)
    info.add_column()
    info.add_row("tile", where(timeline, k))
    if step.phase:
        info.add_row("kernel", step.phase)
    info.add_row("HBM → SRAM", moves(step.reads, timeline.trace.hbm) or "—")
    info.add_row("SRAM → HBM", moves(step.writes, timeline.trace.hbm) or "—")
    title = Text.assemble((paper_line(timeline, k), "bold"), f": {step.text}")
    return Panel(Group(title, info), title=f"Operation · {timeline.algorithm_name}", title_align="left", width=width)


# -- values -------------------------------------------------------------------------------


def before_value(timeline: Timeline, k: int, name: str):
    """A buffer's value before step k changed it (none for a fresh load); for `x_new`, the running `x` it replaces."""
    step = timeline.steps[k]
    before = step.values["before"]
    if step.op == "load":
        return None
    if name in before:
        return before[name]
    if name.endswith("_new"):
        return timeline.value(name.removesuffix("_new"), k)
    return None


def values_panel(timeline: Timeline, k: int, width: int = 60) -> Panel:
    """What the step computed: each buffer it changed, before → after (one query row with --row)."""
    step, row = timeline.steps[k], timeline.trace.row
    title = "Values" + (f" · query row {row}" if row is not None else "")
    if step.values is None:
        if row is not None and timeline.has_values:
            why = f"Row {row} is not in this step's tile; its steps show its values."
        else:
            why = "This trace holds no values (big runs record none); pass --row R to follow one query row."
        return Panel(Text(why, style="dim"), title=title, title_align="left", width=width)
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    names = step.values["after"]
    room = width - 4 - max(map(len, names), default=0) - 1  # inside the border, beside the names
    for name, after in names.items():
        before = before_value(timeline, k, name)
        shown = Table.grid(padding=(0, 1))
        if before is None:
            shown.add_row(matrix(after, room))
        elif fits(before, (room - 3) // 2) and fits(after, (room - 3) // 2):
            shown.add_row(matrix(before, room), Text("→", style="dim"), matrix(after, room))
        else:  # too wide to stand side by side: before above, after below
            shown.add_row(matrix(before, room - 2))
            shown.add_row(Text("→ ", style="dim") + Text(matrix(after, room - 2)))
        note = NOTES.get(name)
        table.add_row(name, Group(shown, Text(note, style="dim")) if note else shown)
    if not step.values["after"]:
        table.add_row(Text("no on-chip values change in this step", style="dim"), "")
    return Panel(table, title=title, title_align="left", width=width)


# -- traffic ------------------------------------------------------------------------------


def traffic_panel(timeline: Timeline, k: int, width: int = 60) -> Panel:
    """HBM bytes so far per tensor, against the closed-form total and the contrasting algorithm's."""
    traffic = timeline.traffic(k)
    l2 = any(t[2] for t in timeline.traffic(len(timeline) - 1).values())
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    table.add_column("HBM so far", no_wrap=True)
    table.add_column("read", justify="right", no_wrap=True)
    table.add_column("written", justify="right", no_wrap=True)
    if l2:
        table.add_column("L2 re-read", justify="right", no_wrap=True)
    for tensor, (read, written, cached) in traffic.items():
        table.add_row(tensor, exact_bytes(read), exact_bytes(written), *([exact_bytes(cached)] if l2 else []))
    step = timeline.steps[k]
    table.add_row(
        Text("total", style="bold"),
        exact_bytes(step.hbm_read_bytes),
        exact_bytes(step.hbm_write_bytes),
        end_section=True,
    )
    closed = timeline.closed_form()
    label, other = timeline.contrast()
    table.add_row("closed form", exact_bytes(closed.hbm_read_bytes), exact_bytes(closed.hbm_write_bytes))
    table.add_row(label, exact_bytes(other.hbm_read_bytes), exact_bytes(other.hbm_write_bytes), style="dim")
    done = step.hbm_read_bytes + step.hbm_write_bytes
    notes = Text(
        f"closed form: the whole run's bytes (sim.iomodel); {label} moves {ratio(other.hbm_bytes / closed.hbm_bytes, 2)} "
        f"as many. Moved so far: {percent(done, closed.hbm_bytes)}; matmul FLOPs so far: {count(step.flops)}.",
        style="dim",
    )
    if l2:
        notes.append(" L2 re-reads are free in Theorem 2's count.", style="dim")
    return Panel(Group(table, notes), title="Traffic", title_align="left", width=width)
