"""One step of a trace as a full screen: the four panels laid out with rich's Layout, a header and the keys."""

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.layout import Layout
from rich.table import Table
from rich.text import Text

from sim.core.format import human_bytes
from sim.viz.panels import memory_panel, operation_panel, traffic_panel
from sim.viz.timeline import Timeline
from sim.viz.values import values_panel

KEYS = "→ next · ← back · t/T next/previous tile (i, j) · g go to step · q quit"
TWO_COLUMNS = 100  # narrower screens stack the panels (unless a short terminal needs them side by side)


def run_title(timeline: Timeline) -> str:
    """The run in one line: algorithm, shape, blocks, dtype, SRAM."""
    return " · ".join(run_parts(timeline))


def run_parts(timeline: Timeline) -> list[str]:
    """The run's parts: algorithm, shape, blocks, dtype, SRAM, the mask and the variants."""
    c = timeline.trace.config
    hardware = f" ({c['hardware']})" if c.get("hardware") else ""
    return [timeline.trace.algorithm, f"N={c['n']} Nk={c['nk']} d={c['d']}", f"Br={c['block_rows']} Bc={c['block_cols']}",
            c["dtype"], f"SRAM {human_bytes(c['sram_bytes'])}{hardware}", *(["causal"] if c.get("causal") else []),
            *variant_title(c).split(" · ")[1:]]  # fmt: skip


def variant_title(c: dict) -> str:
    """The LLM variants a trace's settings name: window, softcap, ALiBi, the K/V head each query head reads (GQA's
    group g: query head h reads K/V head ⌊h/g⌋), and which sequence of a packed batch it is."""
    parts = [f"window=({c['window'][0]}, {c['window'][1]})"] if isinstance(c.get("window"), list) else []
    parts += [f"softcap={c['softcap']:g}"] if isinstance(c.get("softcap"), int | float) else []  # (3 too: red team 99)
    parts += ["ALiBi"] if c.get("alibi") else []
    heads = c.get("query_heads")
    if isinstance(heads, list) and len(heads) == 2 and all(isinstance(h, int) for h in heads):
        parts.append(f"query heads {heads[0]}–{heads[1]} (packed) read K/V head {c['kv_head']}"
                     f" (query head h reads K/V head ⌊h/{heads[1] - heads[0] + 1}⌋)")  # fmt: skip
    elif "kv_head" in c:
        rule = f" (query head h reads K/V head ⌊h/{c['group']}⌋)" if isinstance(c.get("group"), int) else ""
        parts.append(f"query head {c['head'][-1]} reads K/V head {c['kv_head']}{rule}")
    if isinstance(c.get("seqlens"), list):
        lens = c["seqlens"]
        shown = ", ".join(map(str, lens[:6])) + (f", … {len(lens) - 6:,} more" if len(lens) > 6 else "")
        parts.append(f"sequence 0 of {len(lens)} packed (lengths {shown})")
    return "".join(f" · {p}" for p in parts)


class header:
    """The run, as many of its parts as fit, each whole (a number is never cut: red team 96's `fp32 · S…`), then
    ` · …` where some did not; and, always in full, which step this is."""

    def __init__(self, timeline: Timeline, k: int):
        self.timeline, self.k = timeline, k

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        k, n, start = self.k, len(self.timeline), cell_len("flashsim trace ")  # steps are numbered 0 … n − 1
        shown = [f" step {k} · {n} steps", f" step {k}/{n}", f" {k}/{n}"]  # narrower terminals: shorter, never cut
        where = Text(next((w for w in shown if options.max_width - cell_len(w) >= start + 6), shown[-1]), "bold cyan")
        parts, room = run_parts(self.timeline), options.max_width - where.cell_len - start
        titles = [" · ".join(parts[:n]) + (" · …" if n < len(parts) else "") for n in range(len(parts), 0, -1)]
        title = next((t for t in titles if cell_len(t) <= room), parts[0])  # narrower still: the first part, cropped
        grid = Table.grid(expand=True)
        grid.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
        grid.add_column(justify="right", no_wrap=True, width=where.cell_len)
        grid.add_row(Text.assemble(("flashsim trace ", "bold"), title), where)
        yield grid


MOST_CODE = 14  # lines of the listing the operation panel shows at most


class Screen:
    """Step k of a timeline: as many lines as it needs, or exactly `height` lines (a terminal's).

    In a short terminal the panels shed detail until they fit (`_fit`): the memory panel lists its buffers in a
    paragraph, the operation panel shows the lines of code there is room for, the traffic panel its totals alone,
    and last the values panel shows the buffers that fit and names the rest.
    """

    def __init__(self, timeline: Timeline, k: int, footer: str | None = None, height: int | None = None):
        self.timeline, self.k, self.footer, self.height = timeline, k, footer, height

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        t, k, width = self.timeline, self.k, options.max_width
        footer = Text(self.footer or "", style="dim")
        footer_lines = self._lines(console, options, footer) if self.footer else 0
        room = None if self.height is None else self.height - 1 - footer_lines
        side_by_side = width >= TWO_COLUMNS
        columns, sizes, left = self._arrange(console, options, side_by_side, room)
        if room is not None and not side_by_side and width >= 72 and sum(sizes[0]) > room:
            columns, sizes, left = self._arrange(console, options, True, room)  # a short terminal: fit more
        height = self.height or 1 + max(sum(size) for size in sizes) + footer_lines
        body = Layout()
        room = height - 1 - footer_lines
        body.split_row(*(self._column(column, size, room) for column, size in zip(columns, sizes, strict=True)))
        if len(columns) == 2:
            body.children[0].size = left
        root = Layout()
        root.split_column(
            Layout(header(t, k), size=1), body, *([Layout(footer, size=footer_lines)] if footer_lines else [])
        )
        yield from console.render(root, options.update(height=height))

    def _arrange(self, console: Console, options: ConsoleOptions, side_by_side: bool, room: int | None):
        """The panels in one column, or memory on the left and the rest on the right, each fitted to `room` lines
        (None: at full detail); their heights; the left width."""
        t, k, width = self.timeline, self.k, options.max_width
        left = width * 2 // 5 if side_by_side else width
        right = width - left if side_by_side else width
        memory = memory_panel(t, k, left)
        if room is not None and self._lines(console, options, memory) > (room if side_by_side else room // 3):
            memory = memory_panel(t, k, left, compact=True)
        memory_lines = self._lines(console, options, memory)
        rest = self._fit(
            console, options, right, None if room is None else room - (0 if side_by_side else memory_lines)
        )
        heights = [self._lines(console, options, p) for p in rest]
        if side_by_side:
            return [[memory], rest], [[memory_lines], heights], left
        return [[memory, *rest]], [[memory_lines, *heights]], left

    def _fit(self, console: Console, options: ConsoleOptions, width: int, room: int | None) -> list:
        """Operation, values and traffic in `room` lines: in full; else with the lines of code that fit beside the
        full, then the compact traffic panel; else one line of code, and the values panel cut to what is left."""
        t, k = self.timeline, self.k

        def lines(panel) -> int:
            return self._lines(console, options, panel)

        full = [operation_panel(t, k, width), values_panel(t, k, width), traffic_panel(t, k, width)]
        if room is None or sum(map(lines, full)) <= room:
            return full
        full[2] = traffic_panel(t, k, width, machine=False)  # the prediction below HBM gives way first
        if sum(map(lines, full)) <= room:
            return full
        values = full[1]
        for traffic in (full[2], traffic_panel(t, k, width, compact=True)):
            spare = room - lines(operation_panel(t, k, width, 0)) - lines(values) - lines(traffic)
            if spare >= 2:  # the file's name and at least one line of code
                return [operation_panel(t, k, width, min(spare - 1, MOST_CODE)), values, traffic]
        operation = operation_panel(t, k, width, 1)
        left = room - lines(operation) - lines(traffic)
        for most in range(left - 2, 0, -1):  # the values panel's own count of its lines is a close guess
            values = values_panel(t, k, width, most)
            if lines(values) <= left:
                break
        return [operation, values, traffic]

    @staticmethod
    def _column(panels: list, sizes: list[int], height: int) -> Layout:
        """Panels stacked in `height` lines: each, in order, at its natural height while there is room; the last
        takes what is left."""
        room, given = max(0, height), []
        for size in sizes[:-1]:
            given.append(min(size, room))
            room -= given[-1]
        column = Layout()
        column.split_column(*(Layout(p, size=h) for p, h in zip(panels, [*given, room], strict=True)))
        return column

    @staticmethod
    def _lines(console: Console, options: ConsoleOptions, renderable) -> int:
        return len(console.render_lines(renderable, options.update(height=None), pad=False))


def screen(timeline: Timeline, k: int, footer: str | None = None, height: int | None = None) -> Screen:
    """The renderable of step k (the footer line under it, e.g. the keys; `height`: fill exactly that many lines)."""
    return Screen(timeline, k, footer, height)
