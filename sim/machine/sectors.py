"""Inside the SM: a warp's global access in 32-byte sectors, shared memory in 32 banks of 4 bytes.

A warp is 32 lanes that issue one memory instruction together. Its global access moves whole 32-byte
sectors: the bytes it moves are 32 × the distinct sectors its lanes touch, however few of those bytes
it asked for. Shared memory has 32 banks, each serving one 4-byte word per cycle; word w sits in bank
w mod 32. Lanes that want different words of one bank wait for each other: the access takes as many
wavefronts as the busiest bank has distinct words (lanes reading the same word share it). Accesses
wider than 4 bytes a lane are served in phases of 128 bytes (8 lanes for 16 bytes), each phase its
own wavefronts. A tile in shared memory is laid out row-major, with rows padded (`pad` bytes after
each) or XOR-swizzled (16-byte chunk c of row r stored at chunk c ⊕ (r mod 8), within its 128 bytes).

The copy from global to shared memory (cp.async, 16 bytes a lane) fetches one 32-byte sector of L2 for
every 32-byte piece of shared memory a global sector lands in: a sector whose two 16-byte halves land
in two shared sectors crosses L2 → SM twice. Padding a 128-byte row by 16 bytes shifts every other
row by half a sector, so it costs 1.5 × the bytes; the XOR swizzle sends a sector's two halves (chunks
2k and 2k + 1) to the two halves of one 32-byte piece, so it costs 1 ×. This is our model of the counters `flashsim compare` recorded (lesson 13
checks it against them), not a documented fact.
"""

from dataclasses import dataclass

import numpy as np

from sim.core.errors import InputError

SECTOR = 32  # bytes: the unit of L2 ↔ SM and DRAM ↔ L2 traffic
BANKS = 32  # shared-memory banks
WORD = 4  # bytes a bank serves per cycle
WARP = 32  # lanes
PHASE = BANKS * WORD  # 128 bytes of shared memory served per wavefront at most
CHUNK = 16  # bytes a lane moves with one cp.async or ldmatrix row


@dataclass(frozen=True)
class Access:
    """What one or more warp accesses cost: bytes asked for, sectors moved, shared-memory wavefronts."""

    asked_bytes: int = 0
    sectors: int = 0
    wavefronts: int = 0
    ideal_wavefronts: int = 0  # what the same bytes take without a conflict

    @property
    def moved_bytes(self) -> int:
        """Bytes the sectors carry: 32 per sector."""
        return SECTOR * self.sectors

    @property
    def conflict(self) -> float:
        """Wavefronts per conflict-free wavefront: 1 without bank conflicts, 32 at worst for 4-byte lanes."""
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 1.0

    def __add__(self, other: "Access") -> "Access":
        return Access(*(a + b for a, b in zip(self._counts(), other._counts(), strict=True)))

    def _counts(self) -> tuple[int, int, int, int]:
        return self.asked_bytes, self.sectors, self.wavefronts, self.ideal_wavefronts

    def book(self, ledger, tensor: str, level: str = "l2") -> None:
        """Add the moved bytes to a `sim.machine.ledger.Ledger` at `level` (read), and the wavefronts to its work."""
        ledger.book(level, tensor, "read", self.moved_bytes)
        ledger.work["shared_wavefronts"] += self.wavefronts


def sectors(addresses, width: int) -> Access:
    """One warp's global access: lane k reads `width` bytes at byte address `addresses[k]`."""
    a = np.asarray(addresses, dtype=np.int64)
    _check(a, width)
    first, last = a // SECTOR, (a + width - 1) // SECTOR
    touched = {int(s) for f, l in zip(first, last, strict=True) for s in range(f, l + 1)}
    return Access(asked_bytes=width * len(a), sectors=len(touched))


def wavefronts(addresses, width: int = WORD) -> Access:
    """One warp's shared-memory access: lane k reads `width` bytes (4, 8 or 16) at `addresses[k]`."""
    a = np.asarray(addresses, dtype=np.int64)
    _check(a, width)
    if width not in (WORD, 2 * WORD, 4 * WORD) or (a % width).any():
        raise InputError(f"width: shared-memory accesses are 4, 8 or 16 bytes, aligned to their width; got {width}")
    per_phase = PHASE // width  # lanes served together: 32, 16 or 8
    total = ideal = 0
    for p in range(0, len(a), per_phase):
        words = {int(w) for x in a[p : p + per_phase] for w in range(x // WORD, (x + width) // WORD)}
        by_bank = np.bincount([w % BANKS for w in words], minlength=BANKS)
        total += int(by_bank.max())
        ideal += 1
    return Access(asked_bytes=width * len(a), wavefronts=total, ideal_wavefronts=ideal)


@dataclass(frozen=True)
class Layout:
    """A row-major tile in shared memory: `row_bytes` of data a row, then `pad` bytes; or XOR-swizzled."""

    row_bytes: int
    pad: int = 0
    swizzle: bool = False

    @property
    def pitch(self) -> int:
        """Bytes from one row's start to the next's."""
        return self.row_bytes + self.pad

    def address(self, r, byte):
        """Shared-memory byte address of byte `byte` of row `r` (NumPy arrays work elementwise)."""
        r, byte = np.asarray(r), np.asarray(byte)
        if not self.swizzle:
            return r * self.pitch + byte
        chunk = byte // CHUNK
        line, within = chunk // 8, chunk % 8  # 16-byte chunk `within` of 128-byte line `line` of the row
        return r * self.pitch + line * PHASE + ((within ^ (r % 8)) * CHUNK) + byte % CHUNK


def column_read(layout: Layout, rows: int, col_byte: int, width: int = WORD) -> Access:
    """One warp reads `width` bytes at byte `col_byte` of rows 0 … rows − 1 (lane k: row k): down a column."""
    lanes = np.arange(min(rows, WARP))
    return wavefronts(layout.address(lanes, col_byte), width)


def copy_in(layout: Layout, rows: int) -> Access:
    """cp.async of a rows × row_bytes tile from a contiguous global array into `layout`, 16 bytes a lane.

    Each global 32-byte sector costs one L2 → SM sector per 32-byte piece of shared memory it lands in."""
    if layout.row_bytes % SECTOR:
        raise InputError(f"layout: rows of {layout.row_bytes} bytes; the model copies whole 32-byte sectors")
    r, byte = np.divmod(np.arange(rows * layout.row_bytes // CHUNK) * CHUNK, layout.row_bytes)
    sector = (r * layout.row_bytes + byte) // SECTOR  # global: rows are contiguous and sector-aligned
    landed = layout.address(r, byte) // SECTOR  # the shared 32-byte piece each 16-byte chunk lands in
    pairs = set(zip(sector.tolist(), landed.tolist(), strict=True))
    return Access(asked_bytes=rows * layout.row_bytes, sectors=len(pairs))


def tile_read(rows: int, cols: int, itemsize: int, by: str) -> Access:
    """A warp-by-warp read of a row-major global rows × cols tile, one element a lane: `by` "row" gives
    consecutive lanes consecutive elements of a row (coalesced); "column" gives them consecutive rows."""
    if by not in ("row", "column"):
        raise InputError(f"by: 'row' or 'column', not {by!r}")
    r, c = np.divmod(np.arange(rows * cols), cols) if by == "row" else np.divmod(np.arange(rows * cols), rows)[::-1]
    addresses = (r * cols + c) * itemsize
    total = Access()
    for w in range(0, len(addresses), WARP):
        total = total + sectors(addresses[w : w + WARP], itemsize)
    return total


def _check(a: np.ndarray, width: int) -> None:
    if a.ndim != 1 or not 1 <= len(a) <= WARP:
        raise InputError(f"addresses: one warp has 1 to {WARP} lanes; got shape {a.shape}")
    if width < 1 or (a < 0).any():
        raise InputError("addresses: non-negative, and width positive")
