"""HBM traffic per tensor of several runs side by side (the lessons compare passes and splits this way)."""

from collections.abc import Callable

from rich.table import Table

from sim.core.format import count
from sim.machine.memory import Ledger


def per_tensor(ledgers: dict[str, Ledger], order: tuple[str, ...] = (), fmt: Callable[[int], str] = count) -> Table:
    """One row per tensor, a "read" and a "written" column per run, and the totals; tensors named in `order`
    come first, the others as the runs met them. Zero bytes show as an empty cell."""
    traffic = {name: ledger.per_tensor("hbm") for name, ledger in ledgers.items()}
    met = [t for per in traffic.values() for t in per]
    tensors = [t for t in order if t in met] + [t for t in dict.fromkeys(met) if t not in order]
    table = Table()
    table.add_column("tensor")
    for name in ledgers:
        table.add_column(f"{name}\nread", justify="right")
        table.add_column("\nwritten", justify="right")
    for t in tensors:
        cells = [traffic[name].get(t, {}).get(rw, 0) for name in ledgers for rw in ("read", "write")]
        table.add_row(t, *(fmt(c) if c else "" for c in cells))
    totals = [n for ledger in ledgers.values() for n in (ledger.hbm_read_bytes, ledger.hbm_write_bytes)]
    table.add_row("total", *map(fmt, totals), style="bold")
    return table
