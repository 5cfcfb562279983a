"""The chip a submission computes on: `sim.machine.memory.Chip`'s API, with HBM and the ledger kept by the grader.

It runs in the submission's process. `load` asks the grader for a tile (the grader books the
bytes and returns the tile), `store` sends a tile to the grader (which writes it to its own HBM,
rounding to the storage dtype), `put`/`free` declare each SRAM buffer's name and size so that the
grader's SRAM sees every resident buffer. A local SRAM mirror raises an overflow at the line that
caused it; the local ledger is only for printing while debugging — the grader never reads it.
"""

from contextlib import nullcontext

import numpy as np

from sim.core.dtypes import ACCUMULATOR
from sim.core.errors import InputError, SRAMOverflowError
from sim.grading import wire
from sim.machine.memory import SRAM, Ledger, rounded_exp

ERRORS = {"SRAMOverflowError": SRAMOverflowError, "InputError": InputError}


class Link:
    """The submission's end of the pipe: `post` sends, `request` sends and waits for the grader's reply."""

    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.reader = wire.Reader()

    def post(self, header: dict, arrays=()) -> None:
        wire.send(self.fd_out, header, arrays)

    def receive(self) -> tuple[dict, list[np.ndarray]]:
        return self.reader.receive(self.fd_in)

    def messages(self):
        """Each (header, arrays) the grader sends, until "bye" or the pipe's end."""
        while True:
            try:
                header, arrays = self.receive()
            except EOFError:
                return
            if header["op"] == "bye":
                return
            yield header, arrays

    def request(self, header: dict, arrays=()) -> tuple[dict, list[np.ndarray]]:
        """Send and wait for the reply; a refusal is raised as the error the grader named."""
        self.post(header, arrays)
        reply, out = self.receive()
        if reply["op"] == "refused":
            raise ERRORS.get(reply.get("type"), InputError)(reply.get("message", "refused by the grader"))
        return reply, out


class TensorInfo:
    """What a submission may know of an HBM tensor without loading it: its shape and storage dtype."""

    def __init__(self, name: str, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), np.dtype(dtype)
        self.ndim, self.itemsize = len(self.shape), self.dtype.itemsize

    def __getitem__(self, index):
        raise InputError(f"HBM tensor {self.name} cannot be indexed: bring a tile on chip with chip.load")

    def __array__(self, *args, **kwargs):
        raise InputError(f"HBM tensor {self.name} cannot be used as an array: bring a tile on chip with chip.load")


class ProxyHBM:
    """The submission's view of HBM: shapes and dtypes; outputs are allocated here and written with `store`."""

    def __init__(self, link: Link, tensors: dict[str, tuple]):
        self.link = link
        self.tensors = {name: TensorInfo(name, shape, dtype) for name, (shape, dtype) in tensors.items()}

    def place(self, name: str, array) -> None:
        raise InputError("hbm.place: the grader places the inputs; write results with chip.store")

    def alloc(self, name: str, shape: tuple, dtype) -> None:
        """Reserve an output tensor in the grader's HBM (NaN-filled, so a missed write shows)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in (shape if isinstance(shape, tuple | list) else (shape,)))
        self.link.post({"op": "alloc", "name": str(name), "shape": list(shape), "dtype": str(dtype)})
        self.tensors[name] = TensorInfo(name, shape, dtype)


class ProxyChip:
    """`sim.machine.memory.Chip` for a graded submission: same methods, same errors; the grader keeps the truth."""

    def __init__(self, link: Link, sram_bytes: int, tensors: dict[str, tuple]):
        self.link = link
        self.hbm = ProxyHBM(link, tensors)
        self.sram = SRAM(sram_bytes)
        self.ledger = Ledger()
        self.record, self.trace, self.row = "counts", None, None

    def step(self, *args, **kwargs):
        """A no-op: a graded run records no trace."""
        return nullcontext()

    def load(self, buf: str, tensor: str, rows=None, cols=None, *, cached: bool = False) -> np.ndarray:
        """Copy a tile of an HBM tensor into SRAM buffer `buf` (booked by the grader as an HBM read)."""
        reply, (tile,) = self.link.request(
            {"op": "load", "buf": str(buf), "tensor": str(tensor), "rows": _pair(rows), "cols": _pair(cols)}
        )
        self.ledger.book("hbm", tensor, "read", reply["nbytes"])
        self.sram.put(buf, tile, reply["nbytes"])
        return tile

    def put(self, buf: str, value, replaces=()) -> np.ndarray:
        """Keep an on-chip result in SRAM as float32 (replacing `replaces`, as an in-place update)."""
        value = np.asarray(value, dtype=ACCUMULATOR)
        self.link.post(
            {"op": "put", "buf": str(buf), "nbytes": int(value.nbytes), "replaces": [str(r) for r in replaces]}
        )
        self.sram.put(buf, value, value.nbytes, None, replaces)
        return value

    def store(self, tensor: str, value: np.ndarray, rows=None, cols=None) -> None:
        """Write an SRAM buffer to a tile of an HBM tensor (the grader rounds it to the storage dtype)."""
        buf = self._resident(value)
        if buf is None:
            raise AssertionError("store: only SRAM-resident buffers can be written to HBM")
        value = np.asarray(value, dtype=ACCUMULATOR)
        header = {"op": "store", "tensor": str(tensor), "rows": _pair(rows), "cols": _pair(cols), "buf": buf}
        self.link.post(header, [value])
        info = self.hbm.tensors.get(tensor)
        self.ledger.book("hbm", tensor, "write", value.size * (info.itemsize if info else value.itemsize))

    def free(self, *bufs: str) -> None:
        """Release SRAM buffers."""
        self.link.post({"op": "free", "bufs": [str(b) for b in bufs]})
        self.sram.free(*bufs)

    def matmul(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """A @ B on SRAM-resident operands."""
        if not (self.sram.holds(A) and self.sram.holds(B)):
            raise AssertionError("matmul: operands must be resident in SRAM")
        (m, k), n = A.shape, B.shape[1]
        self.ledger.work["matmul"] += 2 * m * n * k
        return A @ B

    def exp(self, x: np.ndarray) -> np.ndarray:
        """Elementwise exp (`rounded_exp`: within half an ulp, as the grader's bound takes it)."""
        self.ledger.work["exp"] += np.size(x)
        return rounded_exp(x)

    def elementwise(self, n: int) -> None:
        """Book `n` elementwise operations (in the local ledger only)."""
        self.ledger.work["elementwise"] += n

    def _resident(self, value) -> str | None:
        """The name of the SRAM buffer `value` is (or is a view of), or None."""
        for name, (array, _, _) in self.sram.buffers.items():
            if value is array or (isinstance(value, np.ndarray) and value.base is not None and value.base is array):
                return name
        return None


def _pair(r):
    """A (start, stop) tile range as a JSON list, or None for the whole axis."""
    return None if r is None else [int(r[0]), int(r[1])]


def tensor_specs(arrays: dict[str, np.ndarray]) -> dict[str, tuple]:
    """{name: (shape, dtype name)} of the grader's HBM tensors, as the submission's process is told them."""
    return {name: (list(a.shape), str(a.dtype)) for name, a in arrays.items()}
