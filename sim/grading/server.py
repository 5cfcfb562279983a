"""The grader's side of a graded run: its own `sim.machine.memory.Chip` answers the submission's requests.

HBM, the SRAM accounting and the ledger live here, in the grader's process; the submission's
process sees only tiles. Every request is checked (names, tile ranges, shapes, sizes) before
it touches the chip; the first one that fails — an SRAM overflow, a tile outside a tensor — is
the run's error, and every later load is refused with it.
"""

import numpy as np

from sim.core.dtypes import DTYPES
from sim.core.errors import FlashsimError, InputError, SRAMOverflowError
from sim.core.format import human_bytes
from sim.machine.memory import Chip

MAX_ALLOC_BYTES = 64 << 20  # HBM a submission may allocate for its outputs in one test
_PLACEHOLDER = np.empty(0, np.float32)  # what the grader's SRAM holds for a buffer whose values live in the submission


class ChipServer:
    """Serves one test's loads, stores, puts, frees and allocations against a Chip holding `inputs`."""

    def __init__(self, sram_bytes: int, inputs: dict[str, np.ndarray]):
        self.chip = Chip(sram_bytes)
        for name, array in inputs.items():  # this run's own copy, read-only: no submission can touch another's
            own = array.copy()
            own.flags.writeable = False
            self.chip.hbm.place(name, own)
        self.inputs = set(inputs)
        self.allocated = 0
        self.error: str | None = None
        self.overflowed = False

    def handle(self, header: dict, arrays: list[np.ndarray]):
        """The reply to one request — (header, arrays) for a load, None for the others."""
        op = header["op"]
        if self.error is not None:
            return ({"op": "refused", "type": "InputError", "message": self.error}, []) if op == "load" else None
        try:
            if op == "load":
                return self._load(header)
            {"put": self._put, "free": self._free, "store": self._store, "alloc": self._alloc}[op](header, arrays)
        except SRAMOverflowError as e:
            self.error, self.overflowed = str(e).split(" (use smaller blocks")[0], True
        except (InputError, KeyError, TypeError, ValueError) as e:
            self.error = str(e) if isinstance(e, FlashsimError) else f"{op}: malformed request ({e})"
        if self.error is not None and op == "load":
            kind = "SRAMOverflowError" if self.overflowed else "InputError"
            return {"op": "refused", "type": kind, "message": self.error}, []
        return None

    def _load(self, h: dict):
        name = _name(h, "tensor")
        rows, cols = self._tile(name, h.get("rows"), h.get("cols"), "load")
        tile = self.chip.load(_name(h, "buf"), name, rows, cols)
        return {"op": "tile", "nbytes": self.chip.sram.buffers[h["buf"]][1]}, [tile]

    def _put(self, h: dict, arrays) -> None:
        nbytes = h["nbytes"]
        if not isinstance(nbytes, int) or nbytes < 0:
            raise InputError(f"put: {nbytes!r} is not a size in bytes")
        replaces = [str(r) for r in h.get("replaces", [])]
        self.chip.sram.put(_name(h, "buf"), _PLACEHOLDER, nbytes, None, replaces)

    def _free(self, h: dict, arrays) -> None:
        self.chip.sram.free(*(str(b) for b in h["bufs"]))

    def _store(self, h: dict, arrays) -> None:
        name, buf = _name(h, "tensor"), _name(h, "buf")
        if name in self.inputs:
            raise InputError(f"store: {name} is an input, read-only to a submission; write your results to outputs")
        rows, cols = self._tile(name, h.get("rows"), h.get("cols"), "store")
        if buf not in self.chip.sram.buffers:
            raise InputError(f"store: {buf} is not resident in SRAM, so it cannot be written to {name}")
        shape = tuple(b - a for a, b in (rows, cols)[: self.chip.hbm.tensors[name].ndim])
        if len(arrays) != 1 or arrays[0].shape != shape:
            got = arrays[0].shape if len(arrays) == 1 else "no array"
            raise InputError(f"store: the tile of {name} at rows {list(rows)} is {shape}, the value written is {got}")
        access = self.chip.hbm.write(name, arrays[0], rows, cols if len(shape) == 2 else None)
        self.chip.ledger.book("hbm", name, "write", access.nbytes)

    def _alloc(self, h: dict, arrays) -> None:
        name, shape, dtype = _name(h, "name"), h["shape"], h["dtype"]
        if name in self.inputs:
            raise InputError(f"hbm.alloc: {name} is an input; outputs need names of their own")
        if name in self.chip.hbm.tensors:  # (red team 109: S kept whole in O, then O allocated again as it must be)
            raise InputError(f"hbm.alloc: {name} is in HBM already; allocate each tensor once")
        allowed = {str(dt): dt for dt in DTYPES.values()}
        if dtype not in allowed:
            raise InputError(f"hbm.alloc: {name} in {dtype}; HBM holds {', '.join(allowed)}")
        if not (isinstance(shape, list) and 1 <= len(shape) <= 2 and all(isinstance(n, int) and n > 0 for n in shape)):
            raise InputError(f"hbm.alloc: {name} of shape {shape}; a tensor has one or two positive dimensions")
        nbytes = int(np.prod(shape)) * allowed[dtype].itemsize
        if self.allocated + nbytes > MAX_ALLOC_BYTES:
            raise InputError(
                f"hbm.alloc: {name} ({human_bytes(nbytes)}) takes the outputs over {human_bytes(MAX_ALLOC_BYTES)}"
            )
        self.allocated += nbytes
        self.chip.hbm.alloc(name, tuple(shape), allowed[dtype])

    def _tile(self, name: str, rows, cols, op: str):
        """(rows, cols) as checked (start, stop) pairs inside tensor `name`."""
        if name not in self.chip.hbm.tensors:
            known = ", ".join(self.chip.hbm.tensors)
            raise InputError(f"{op}: there is no tensor {name!r} in HBM (there are {known})")
        shape = self.chip.hbm.tensors[name].shape
        return tuple(
            _range(r, shape[axis] if axis < len(shape) else 1, f"{op} {name} {what}")
            for axis, (r, what) in enumerate(((rows, "rows"), (cols, "cols")))
        )

    def output(self, name: str) -> np.ndarray | None:
        """What HBM holds under `name` now (None if the submission never allocated it)."""
        return self.chip.hbm.tensors.get(name)


def _name(h: dict, key: str) -> str:
    value = h.get(key)
    if not isinstance(value, str) or not value or len(value) > 64:
        raise InputError(f"{h['op']}: {key} must be a name of 1 to 64 characters, not {str(value)[:70]!r}")
    return value


def _range(r, n: int, what: str) -> tuple[int, int]:
    """A (start, stop) pair with 0 ≤ start < stop ≤ n; None means the whole axis."""
    if r is None:
        return 0, n
    if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r) and 0 <= r[0] < r[1] <= n):
        raise InputError(f"{what} {r} outside 0…{n} (a tile is (start, stop) with start < stop)")
    return r[0], r[1]
