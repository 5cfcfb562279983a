"""Run a kernel under Triton's interpreter with every load, store and atomic recorded and sent to shadow memory.

Every memory access of the interpreter passes through its builder's `create_masked_load`,
`create_masked_store` and `create_atomic_rmw` (plain, atomic, block-pointer and descriptor loads
included); for the launch these are replaced by the methods below. Each books the elements its
mask lets through, at their element size, against the argument they land in and the kernel line
that asked; each also measures the program's tiles (the floating-point blocks the kernel's local
variables hold at that moment), whose largest total is checked against the SRAM budget.
"""

import os
import sys
from collections import Counter
from contextlib import contextmanager

import numpy as np
import triton.language as tl
from triton.runtime import interpreter

from sim.grading.triton.shadow import Buffer, MemoryFault, Shadow

NAMES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}


class Record:
    """What one launch moved: bytes per (argument, "read"/"write", line), and the largest program's tiles."""

    def __init__(self, shadow: Shadow, file: str):
        self.shadow = shadow
        self.file = os.path.realpath(file)
        self.moved: Counter = Counter()
        self.peak = (0, -1, 0)  # tile bytes, program, line

    def _where(self) -> int:
        """The kernel's line that made this access; the program's tile bytes at it update the peak."""
        frame, line, seen, tiles = sys._getframe(2), 0, set(), 0
        while frame is not None:
            if os.path.realpath(frame.f_code.co_filename) == self.file:
                line = line or frame.f_lineno
                for value in frame.f_locals.values():
                    if isinstance(value, tl.tensor) and value.type.is_block() and value.dtype.is_floating():
                        if id(value.handle) not in seen:
                            seen.add(id(value.handle))
                            tiles += value.handle.data.size * value.dtype.primitive_bitwidth // 8
            frame = frame.f_back
        if tiles > self.peak[0]:
            self.peak = (tiles, interpreter.interpreter_builder.grid_idx[0], line)
        return line

    def _place(self, ptrs, mask, verb: str):
        """The masked addresses' buffers and elements (MemoryFault for any outside the arguments)."""
        line = self._where()
        element_type = ptrs.get_element_ty()
        storage = interpreter._get_np_dtype(element_type)
        chosen = np.broadcast_to(mask.data, ptrs.data.shape)
        addresses = ptrs.data[chosen]
        which, element = self.shadow.locate(addresses, storage.itemsize, f"a {verb}")
        for b in np.unique(which):
            buffer = self.shadow.buffers[b]
            if NAMES.get(buffer.dtype.name) != element_type.name:
                raise MemoryFault(f"a {verb} treats {buffer.name} ({NAMES.get(buffer.dtype.name)}) as "
                                  f"{element_type.name}; load it as stored and convert with .to()")  # fmt: skip
        return line, storage, chosen, which, element

    def _book(self, which, storage, direction: str, line: int) -> None:
        for b, n in zip(*np.unique(which, return_counts=True), strict=True):
            self.moved[(self.shadow.buffers[b].name, direction, line)] += int(n) * storage.itemsize

    def load(self, ptrs, mask, other, *flags, **named):
        """`tl.load`: the private elements under the mask, `other` (or 0) elsewhere. `flags`, `named`: the cache and
        volatile hints, which no byte count depends on (Triton 3.6 passes cache modifier, eviction policy, volatile;
        its descriptor loads by name)."""
        line, storage, chosen, which, element = self._place(ptrs, mask, "load")
        out = np.zeros(ptrs.data.shape, storage)
        if other is not None:
            out[...] = np.broadcast_to(other.data, ptrs.data.shape)
        values = np.empty(len(which), storage)
        for b in np.unique(which):
            here = which == b
            values[here] = self.shadow.flat(b, storage)[element[here]]
        out[chosen] = values
        self._book(which, storage, "read", line)
        return interpreter.TensorHandle(out, ptrs.get_element_ty())

    def store(self, ptrs, value, mask, *flags, **named):
        """`tl.store`: the values under the mask into the private copy."""
        line, storage, chosen, which, element = self._place(ptrs, mask, "store")
        values = np.broadcast_to(value.data, ptrs.data.shape)[chosen].astype(storage, copy=False)
        for b in np.unique(which):
            here = which == b
            self.shadow.flat(b, storage)[element[here]] = values[here]
        self._book(which, storage, "write", line)

    def atomic_rmw(self, op, ptrs, value, mask, sem, scope):
        """`tl.atomic_add` (the only atomic graded): read, add, write back; booked as a read and a write."""
        if op not in (interpreter._ir.ATOMIC_OP.ADD, interpreter._ir.ATOMIC_OP.FADD):
            raise MemoryFault("only tl.atomic_add is graded among the atomics")
        line, storage, chosen, which, element = self._place(ptrs, mask, "tl.atomic_add")
        old = np.zeros(ptrs.data.shape, storage)
        added = np.broadcast_to(value.data, ptrs.data.shape)[chosen]
        before = np.empty(len(which), storage)
        for b in np.unique(which):
            here, values = which == b, self.shadow.buffers[b].values.reshape(-1)
            before[here] = values.view(storage)[element[here]]
            np.add.at(values, element[here], added[here].view(values.dtype))  # same width: the type was checked
        old[chosen] = before
        self._book(which, storage, "read", line)
        self._book(which, storage, "write", line)
        return interpreter.TensorHandle(old, value.dtype.scalar)

    def refuse(self, *args):
        raise MemoryFault("atomic compare-and-swap is not graded; use tl.atomic_add")


def _index(self) -> int:
    """`tl.tensor.__index__` in the interpreter: a scalar argument is a one-element array there, which Triton 3.6's
    own `int(self.handle.data)` NumPy 2.5 refuses (only a 0-dimensional array converts): `range(0, Nk, BLOCK_N)`
    failed."""
    data = np.asarray(self.handle.data)
    return int(data.reshape(-1)[0]) if data.size == 1 else int(data)


@contextmanager
def recording(record: Record):
    """The interpreter's builder, for the launch, with its memory operations replaced by `record`'s (and where the
    interpreter patches `tl.tensor` for a launch, its `__index__` made to take a one-element array)."""
    builder = interpreter.interpreter_builder
    hooks = {"create_masked_load": record.load, "create_masked_store": record.store,
             "create_atomic_rmw": record.atomic_rmw, "create_atomic_cas": record.refuse}  # fmt: skip
    for name, hook in hooks.items():
        setattr(builder, name, hook)
    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if patch_tensor is not None:

        def patched(tensor, scope):
            patch_tensor(tensor, scope)  # the scope restores tensor's own attributes when the launch ends
            tensor.__index__ = _index

        interpreter._patch_lang_tensor = patched
    try:
        yield record
    finally:
        for name in hooks:
            delattr(builder, name)
        if patch_tensor is not None:
            interpreter._patch_lang_tensor = patch_tensor


def launch(kernel, grid: tuple[int, ...], buffers: list[Buffer], scalars: list, constexprs: dict, file: str) -> Record:
    """Run `kernel[grid](*buffers, *scalars, **constexprs)` interpreted; its record (outputs stay in the buffers)."""
    record = Record(Shadow(buffers), file)
    with recording(record):
        try:
            kernel[grid](*buffers, *scalars, **constexprs)
        except interpreter.InterpreterError as e:
            raise (e.__cause__ or e) from None
    return record
