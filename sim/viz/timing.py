"""The table `flashsim bench trace` prints: how fast the trace viewer opens a big run and answers a key."""

from rich.table import Table

from sim.core.format import count, number


def open_times(rows: list[dict]) -> Table:
    """One row per algorithm: steps recorded, seconds to open (record + first screen), milliseconds per key."""
    first = rows[0]
    table = Table(
        title=f"trace viewer · N = Nk = {first['n']}, d = {first['d']}, {first['dtype']}, {first['hardware']}",
        title_justify="left",
    )
    table.add_column("algorithm")
    for name in ("steps", "record (s)", "open (s)", "per key (ms)"):
        table.add_column(name, justify="right")
    for r in rows:
        table.add_row(
            r["algorithm"],
            count(r["steps"]),
            number(r["record_s"], 2),
            number(r["open_s"], 2),
            number(1000 * r["per_key_s"], 0),
        )
    table.caption = "open: record the trace and draw its first screen, in-process (the command adds Python's start-up)"
    return table
