"""The Ledger: every byte that crosses a memory level, and every operation, booked as it happens."""

from collections import defaultdict


class Ledger:
    """Bytes per (level, tensor, direction) and work per kind ("matmul" FLOPs, "exp", "elementwise")."""

    def __init__(self):
        self.bytes: dict[tuple[str, str, str], int] = defaultdict(int)
        self.work: dict[str, int] = defaultdict(int)
        self.hbm_read_bytes = 0
        self.hbm_write_bytes = 0

    def book(self, level: str, tensor: str, direction: str, nbytes: int) -> None:
        """Record `nbytes` moving `direction` ("read" or "write") between `level` and SRAM."""
        self.bytes[level, tensor, direction] += nbytes
        if level == "hbm":
            if direction == "read":
                self.hbm_read_bytes += nbytes
            else:
                self.hbm_write_bytes += nbytes

    @property
    def flops(self) -> int:
        """Matmul FLOPs, 2·m·n·k per product."""
        return self.work["matmul"]

    def per_tensor(self, level: str = "hbm") -> dict[str, dict[str, int]]:
        """{tensor: {"read": bytes, "write": bytes}} at one level."""
        out: dict[str, dict[str, int]] = {}
        for (lvl, tensor, direction), n in self.bytes.items():
            if lvl == level:
                out.setdefault(tensor, {"read": 0, "write": 0})[direction] += n
        return out

    def add(self, other: "Ledger", times: int = 1) -> None:
        """Add `times` copies of another ledger's counts to this one."""
        for key, n in other.bytes.items():
            self.book(*key, n * times)
        for kind, n in other.work.items():
            self.work[kind] += n * times

    def to_dict(self) -> dict:
        """JSON-ready counts."""
        return {
            "hbm_read_bytes": self.hbm_read_bytes,
            "hbm_write_bytes": self.hbm_write_bytes,
            "bytes": [
                {"level": lvl, "tensor": t, "direction": d, "bytes": n} for (lvl, t, d), n in sorted(self.bytes.items())
            ],
            "work": dict(self.work),
        }
