"""Tables whose numbers and names are never cut with "…" nor broken: a column of quantities (a number and its unit,
"1,171.3 µs", "268.4 MB", "6.1×") keeps its width and never wraps; elsewhere a column is at least as wide as its
longest number (and the first column, the rows' names, as its longest first word); other text wraps between words."""

import re

from rich.table import Table
from rich.text import Text

# a number with at most a short unit or marker after it: 1,024 · −3.5e-04 · 268.4 MB · 1.0× · 96% · 13* · 3.3 GB/s
QUANTITY = re.compile(r"[−+-]?\d[\d,.]*(e[−+-]?\d+)?( ?[A-Za-zµ]{1,3}(/s)?| ?[×%*])?")


def unclipped(table: Table) -> Table:
    """`table` laid out so that a narrow terminal wraps headers and notes between words, never inside a quantity."""
    for first, column in zip((True, *[False] * len(table.columns)), table.columns, strict=False):
        cells = [c for c in map(_plain, column._cells) if c is not None]
        if cells and any(cells) and all(QUANTITY.fullmatch(c) for c in cells if c):
            column.no_wrap = True  # rich shrinks only the columns that wrap: quantities keep their width
            column.min_width = max([column.min_width or 0, *map(len, cells)])
            continue
        words = [w for c in cells for w in (c.split() if not first else c.split()[:1])]
        kept = [w for w in words if first or any(ch.isdigit() for ch in w)]
        column.min_width = max([column.min_width or 0, *map(len, kept)])
        column.overflow = "fold"  # a word wider than the whole table is broken, never ellipsized
    return table


def _plain(cell: object) -> str | None:
    if isinstance(cell, Text):
        return cell.plain.strip()
    return Text.from_markup(cell).plain.strip() if isinstance(cell, str) else None
