"""The plain step listing of a trace: what each executed line of the paper loaded, computed and stored."""

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sim.core.format import decimal_bytes, human_bytes, number
from sim.machine.trace import Access, Step, Trace

MOST = 64  # rows and columns of a matrix the listing shows


def array(values, whole: bool = False) -> str:
    """A vector or matrix (nested lists) as aligned text, one row per line (`whole`: no decimals), at most MOST rows
    and columns of it (a loaded trace's 1000 × 1000 took 50 s to list in full: red team 92)."""
    if not isinstance(values, list):
        return number(values)
    rows = values if values and isinstance(values[0], list) else [values]
    cells = [[number(x, 0 if whole else 3) for x in row[:MOST]] for row in rows[:MOST]]
    width = max((len(c) for row in cells for c in row), default=0)
    text = "\n".join("[" + "  ".join(c.rjust(width) for c in row) + "]" for row in cells)
    left = [f"{len(rows) - MOST:,} more rows of {len(rows):,}"] * (len(rows) > MOST)
    left += [f"{len(rows[0]) - MOST:,} more columns of {len(rows[0]):,}"] * (len(rows[0]) > MOST)
    return text + ("\n… " + ", ".join(left) if left else "")


def tile(a: Access, width: int | None = None) -> str:
    """`Q[0:2]` for a block of whole rows, `S[0:2, 2:4]` for a tile of some columns."""
    cols = "" if a.c0 == 0 and a.c1 in (1, width) else f", {a.c0}:{a.c1}"
    return f"{a.tensor}[{a.r0}:{a.r1}{cols}]"


def moves(accesses: list[Access], hbm: dict) -> str:
    """The tiles of one direction and their bytes: `Q[0:2] 32 B, K[0:2] 32 B`."""

    def width(tensor: str) -> int | None:
        shape = hbm.get(tensor, {}).get("shape", [])
        return shape[1] if len(shape) == 2 else None

    return ", ".join(
        f"{tile(a, width(a.tensor))} {decimal_bytes(a.nbytes)}" + (" (L2)" if a.level == "l2" else "") for a in accesses
    )


def change(before, after) -> RenderableType:
    """`before  →  after`, side by side (matrices stay aligned)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_row(array(before), Text("→", style="dim"), array(after))
    return grid


def header(step: Step) -> Text:
    """`step 4 · line 9 · i=0 j=1` plus the kernel name where an algorithm has several."""
    parts = [f"step {step.index}"]
    if step.phase:
        parts.append(step.phase)
    if step.line is not None:
        parts.append(f"line {step.line}")
    where = " ".join(f"{name}={v}" for name, v in (("i", step.i), ("j", step.j)) if v is not None)
    if where:
        parts.append(where)
    return Text(" · ".join(parts), style="bold")


def render_step(
    step: Step, sram_capacity: int | None = None, hbm: dict | None = None, latest: dict | None = None
) -> RenderableType:
    """One step: its line of the paper, the tiles moved, the values written, the traffic so far.

    `latest` holds each buffer's value before this step, so that a new running statistic
    `x_new` shows beside the `x` it replaces (m_i → m_i_new).
    """
    body = Table.grid(padding=(0, 1))
    body.add_column(style="cyan", no_wrap=True)
    body.add_column()
    if step.reads:
        body.add_row("HBM → SRAM", moves(step.reads, hbm or {}))
    if step.writes:
        body.add_row("SRAM → HBM", moves(step.writes, hbm or {}))
    if step.values:
        before = dict(step.values["before"])
        for name in step.values["after"]:
            if name not in before and name.endswith("_new") and name.removesuffix("_new") in (latest or {}):
                before[name] = latest[name.removesuffix("_new")]
        for name, after in step.values["after"].items():
            body.add_row(name, change(before[name], after) if name in before else array(after))
    capacity = f" of {human_bytes(sram_capacity)}" if sram_capacity else ""
    totals = (
        f"SRAM {human_bytes(step.sram_bytes)}{capacity} · HBM so far {decimal_bytes(step.hbm_read_bytes)} read, "
        f"{decimal_bytes(step.hbm_write_bytes)} written"
    )
    return Group(header(step), Text(step.text), body, Text(totals, style="dim"), Text(""))


def listing(trace: Trace) -> RenderableType:
    """Every step of a trace, in order."""
    capacity = trace.config.get("sram_bytes")
    latest: dict = {}
    rendered = []
    for s in trace.steps:
        rendered.append(render_step(s, capacity, trace.hbm, dict(latest)))
        latest.update((s.values or {}).get("after", {}))
    return Group(*rendered)
