"""sim.viz.traffic.per_tensor: the HBM bytes of several ledgers, tensor by tensor, with their totals."""

from sim.machine.memory import Ledger
from sim.viz.traffic import per_tensor


def _ledger(*bookings) -> Ledger:
    ledger = Ledger()
    for tensor, direction, n in bookings:
        ledger.book("hbm", tensor, direction, n)
    ledger.book("l2", "K", "read", 999)  # another level: not HBM traffic
    return ledger


def test_rows_follow_the_order_given_then_the_order_met():
    one = _ledger(("K", "read", 10), ("Q", "read", 4), ("O", "write", 4))
    two = _ledger(("Q", "read", 8), ("O_parts", "write", 2), ("O_parts", "read", 2), ("O", "write", 4))
    table = per_tensor({"1 split": one, "2 splits": two}, order=("Q", "K"))
    assert [c.header for c in table.columns] == ["tensor", "1 split\nread", "\nwritten", "2 splits\nread", "\nwritten"]
    rows = list(zip(*(c.cells for c in table.columns), strict=True))
    assert rows == [
        ("Q", "4", "", "8", ""),
        ("K", "10", "", "", ""),
        ("O", "", "4", "", "4"),
        ("O_parts", "", "", "2", "2"),
        ("total", "14", "4", "10", "6"),
    ]


def test_bytes_go_through_the_formatter_given():
    table = per_tensor({"run": _ledger(("V", "read", 3 * 2**20))}, fmt=lambda n: f"{n / 2**20:.0f} MiB")
    assert list(table.columns[1].cells) == ["3 MiB", "3 MiB"]
