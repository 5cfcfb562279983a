"""A kernel beside the simulator's listing, paper line by paper line (lesson 8 reads them this way).

Both mark the line of the paper each piece of code implements: the simulator in its `chip.step(op,
line, …)` calls and in `# line N` comments, a CUDA kernel in comment lines that start `// line N`.
`python_sections` and `cuda_sections` cut a source into those pieces; `side_by_side` lines two
listings up, one row per paper line, in a rich table. Pure Python: no CuPy, no GPU.
"""

import ast
import re
import textwrap
from dataclasses import dataclass

from rich.syntax import Syntax
from rich.table import Table

_PAPER_LINES = re.compile(r"\blines? (\d+)(?:\s*[–-]\s*(\d+))?")


@dataclass(frozen=True)
class Section:
    """Consecutive lines of a source file that implement some of the paper's lines."""

    lines: tuple[int, ...]  # the paper's line numbers
    first: int  # its first line in the file, counted from 1
    code: str


def _paper_lines(text: str) -> tuple[int, ...]:
    """Every paper line a comment names: "line 9", "lines 1–2", "line 12 … line 14"."""
    found = []
    for a, b in _PAPER_LINES.findall(text):
        found += range(int(a), int(b or a) + 1)
    return tuple(dict.fromkeys(found))


def python_sections(source: str) -> list[Section]:
    """The `with chip.step(op, line, …):` blocks of a simulator listing, and the statements outside them whose
    first line carries a `# line N` comment (a loop: its header only), in file order."""
    lines = source.splitlines()
    nodes = list(ast.walk(ast.parse(source)))
    steps = [(n.lineno, n.end_lineno, (_step_line(n),)) for n in nodes if isinstance(n, ast.With) and _step_line(n)]
    commented = [
        (n.lineno, n.lineno, _paper_lines(lines[n.lineno - 1].split("#", 1)[1]))
        for n in nodes
        if isinstance(n, ast.stmt) and "#" in lines[n.lineno - 1] and not any(a <= n.lineno <= b for a, b, _ in steps)
    ]
    return sorted(
        (
            Section(paper, first, textwrap.dedent("\n".join(lines[first - 1 : last])))
            for first, last, paper in steps + commented
            if paper
        ),
        key=lambda s: s.first,
    )


def _step_line(node: ast.With) -> int | None:
    """The paper line of `with chip.step(op, line, …)`, None for any other `with` or a step without one."""
    call = node.items[0].context_expr
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "step"):
        return None
    line = call.args[1] if len(call.args) > 1 else None
    return line.value if isinstance(line, ast.Constant) and isinstance(line.value, int) else None


def cuda_sections(source: str) -> list[Section]:
    """From each run of comment lines that names a paper line (`// line N`) to the next such run: the
    paper lines the run names and the code under it."""
    lines = source.splitlines()
    comment = [text.strip().startswith("//") for text in lines]
    runs = [n for n in range(len(lines)) if comment[n] and not (n and comment[n - 1])]  # first line of each run
    starts = []
    for n in runs:
        run = lines[n : next((m for m in range(n, len(lines)) if not comment[m]), len(lines))]
        if any(re.match(r"\s*// line \d", text) for text in run):
            starts.append((n, "\n".join(run)))
    ends = [n for n, _ in starts[1:]] + [len(lines)]
    return [
        Section(_paper_lines(run), n + 1, textwrap.dedent("\n".join(lines[n:end]).rstrip()))
        for (n, run), end in zip(starts, ends, strict=True)
    ]


def side_by_side(left: tuple, right: tuple, only: set[int] | None = None, width: int = 72) -> Table:
    """One row per paper line (or group of lines that one side implements together): `left` and `right`
    are (title, lexer, sections); `only` keeps the rows that touch those paper lines."""
    rows: list[tuple[set[int], list[Section], list[Section]]] = []  # (paper lines, left's sections, right's)
    for side, (_, _, sections) in enumerate((right, left)):  # the right side's groups first, then the left's join them
        for s in sections:
            row = next((r for r in rows if r[0] & set(s.lines)), None)
            if row is None:
                row = (set(), [], [])
                rows.append(row)
            row[0].update(s.lines)
            row[2 - side].append(s)
    table = Table(show_lines=True, expand=False)
    table.add_column("paper line", justify="right", style="bold")
    for title, _, _ in (left, right):
        table.add_column(title, width=width)
    for paper, lefts, rights in sorted(rows, key=lambda r: min(r[0])):
        if only is not None and not paper & only:
            continue
        cells = [_code(ss, lexer) for ss, (_, lexer, _) in ((lefts, left), (rights, right))]
        table.add_row(", ".join(map(str, sorted(paper))), *cells)
    return table


def _code(sections: list[Section], lexer: str):
    """The sections' code, highlighted, numbered as in their file (one block per section)."""
    if not sections:
        return ""
    grid = Table.grid()
    for s in sections:
        grid.add_row(Syntax(s.code, lexer, line_numbers=True, start_line=s.first, word_wrap=True))
    return grid
