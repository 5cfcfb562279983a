"""The trace viewer's values panel: what a step computed on chip, each buffer it changed, before and after."""

from math import ceil

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sim.core.format import number, plural
from sim.viz.timeline import Timeline

NOTES = {
    "α_i": "rescale of the old O_i, ℓ_i: e^(m_old − m_new)",
    "β_i": "rescale of this block: e^(m̃_ij − m_new)",
    "m_new": "the new running max",
}
MAX_ROWS = 6  # rows of a matrix the values panel shows before eliding


def matrix(values, room: int = 80, max_rows: int = MAX_ROWS) -> str:
    """A scalar, vector or matrix as aligned text in at most `room` columns, elided with … where it does not fit,
    and a last line saying what was left out: `… 2 more rows of 8, 5 more columns of 9`."""
    if not isinstance(values, list):
        return number(values)
    rows = values if values and isinstance(values[0], list) else [values]
    max_rows = len(rows) if len(rows) == max_rows + 1 else max_rows
    cells = [[number(x) for x in row] for row in rows[:max_rows]]
    width = max((len(c) for row in cells for c in row), default=0)
    total = max(map(len, cells), default=0)
    shown = total if 2 + total * (width + 2) - 2 <= room else max(1, (room - 5) // (width + 2))
    lines = [
        "[" + "  ".join(c.rjust(width) for c in row[:shown]) + ("  …" if len(row) > shown else "") + "]"
        for row in cells
    ]
    left = []  # what was left out (never a single row: its line would say no less than the count)
    if len(rows) > max_rows:
        left.append(f"{len(rows) - max_rows:,} more rows of {len(rows):,}")
    if total > shown:  # a vector's values, a matrix's columns
        left.append(f"{total - shown:,} more of {total:,}" if len(rows) == 1 else
                    f"{plural(total - shown, 'more column')} of {total:,}")  # fmt: skip
    if len(", ".join(left)) + 2 > room:  # each on a line of its own
        return "\n".join(lines + [f"… {part}" for part in left])
    return "\n".join(lines + [f"… {', '.join(left)}"] * bool(left))


def fits(values, room: int) -> bool:
    """Whether `matrix` shows every column of `values` in `room` columns."""
    return "…" not in matrix(values, room, max_rows=1).split("\n")[0]


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


def entry(name: str, before, after, room: int, max_rows: int = MAX_ROWS, notes: bool = True) -> tuple[list, int]:
    """One buffer's rows of the panel's table (name, label, value) and how many lines they take: `before → after`
    side by side where both fit, else `before` above `after`, each labelled, so that no row reads ambiguously;
    with `notes`, what a rescale factor is, in a line beneath."""
    note = NOTES.get(name) if notes else None
    if before is None:
        shown = matrix(after, room, max_rows)
        rows = [(name, "", Text(shown))]
    elif fits(before, (room - 3) // 2) and fits(after, (room - 3) // 2):
        pair = Table.grid(padding=(0, 1))
        pair.add_row(matrix(before, room, max_rows), Text("→", style="dim"), matrix(after, room, max_rows))
        rows = [(name, "", pair)]
        shown = matrix(before, room, max_rows)
    else:
        room -= 7  # the label column
        was, now = matrix(before, room, max_rows), matrix(after, room, max_rows)
        rows = [(name, Text("before", style="dim"), was), ("", Text("after", style="dim"), now)]
        shown = was + "\n" + now
    if note:
        rows.append(("", "", Text(note, style="dim")))
    return rows, shown.count("\n") + 1 + (ceil(len(note) / max(1, room)) if note else 0)


def values_panel(timeline: Timeline, k: int, width: int = 60, max_lines: int | None = None) -> Panel:
    """What the step computed: each buffer it changed, before → after (one query row with --row); with
    `max_lines` (a short terminal), the buffers that fit, then a line naming the rest."""
    step, row = timeline.steps[k], timeline.trace.row
    title = "Values" + (f" · query row {row}" if row is not None else "")
    if step.values is None:
        if row is not None and timeline.has_values:
            rows = f" (rows {step.rows[0]}:{step.rows[1]})" if step.rows else ""
            why = f"Row {row} is not in this step's tile{rows}; --row R follows another query row."
        else:
            why = "This trace holds no values (big runs record none); pass --row R to follow one query row."
        return Panel(Text(why, style="dim"), title=title, title_align="left", width=width)
    names = step.values["after"]
    room = width - 4 - max(map(len, names), default=0) - 1  # inside the border, beside the names
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for max_rows, notes in ((MAX_ROWS, True), (MAX_ROWS, False), (3, False), (1, False)):  # a short terminal: no
        entries = [  # notes, then fewer rows of each matrix, before fewer matrices
            (name, *entry(name, before_value(timeline, k, name), after, room, max_rows, notes))
            for name, after in names.items()
        ]
        if max_lines is None or sum(e[2] for e in entries) <= max_lines:
            break
    budget = None if max_lines is None or sum(e[2] for e in entries) <= max_lines else max_lines - 1  # and "… and"
    used, left = 0, []
    for name, rows, lines in entries:
        if left or (budget is not None and used + lines > budget):
            left.append(name)
            continue
        used += lines
        for cells in rows:
            table.add_row(*cells)
    if not names:
        whose = "on-chip values" if row is None else f"values of query row {row}"
        return Panel(Text(f"no {whose} change in this step", style="dim"), title=title, title_align="left", width=width)
    body = Group(table, Text(f"… and {', '.join(left)} — a taller terminal shows them", style="dim")) if left else table
    return Panel(body, title=title, title_align="left", width=width)
