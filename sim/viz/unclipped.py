"""Tables whose numbers and names are never cut with "…": a column is at least as wide as its longest number (and the
first column, the rows' names, as its longest name); other text wraps between words."""

from rich.table import Table
from rich.text import Text


def unclipped(table: Table) -> Table:
    """`table` with each column's minimum width its longest number (the first column's: its longest first word), so that
    a narrow terminal wraps the text of headers and notes between words rather than cutting a number or a name."""
    for first, column in zip((True, *[False] * len(table.columns)), table.columns, strict=False):
        cells = [_plain(c) for c in column._cells if isinstance(c, str | Text)]
        words = [w for c in cells for w in (c.split() if not first else c.split()[:1])]
        kept = [w for w in words if first or any(ch.isdigit() for ch in w)]
        column.min_width = max([column.min_width or 0, *map(len, kept)])
        column.overflow = "fold"  # a word wider than the whole table is broken, never ellipsized
    return table


def _plain(cell: str | Text) -> str:
    return cell.plain if isinstance(cell, Text) else Text.from_markup(cell).plain
