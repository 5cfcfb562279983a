"""Run a kernel under Triton's interpreter with every load, store and atomic recorded and sent to shadow memory.

Every memory access of the interpreter passes through its builder's `create_masked_load`,
`create_masked_store` and `create_atomic_rmw` (plain, atomic, block-pointer and descriptor loads
included); for the launch these are replaced by the methods below. Each books the elements its
mask lets through, at their element size, against the argument they land in and the kernel line
that asked; each also measures what the program holds at that moment (a load's result included),
whose largest total is checked against the SRAM budget.

What a program holds: every value it made that is still alive, however it keeps it, less its
index arithmetic and less what only names dead there hold (`liveness`: a GPU frees a tile after its
last use); at each `tl.dot` too (where S_ij meets Q_i, K_j, V_j and O_i), the values live names hold
and the product. The interpreter makes every value as a `TensorHandle`; each one made while a
program runs is registered, weakly, so what the program has dropped is gone and what it keeps
counts wherever it keeps it: a variable, a tuple, a list, a dict, a module global, an attribute of
the kernel, a default argument, or only Python's stack (an argument being built, a load's result).
A value the builder made from the program id, tl.arange, the launch's arguments and constants
alone is index arithmetic (addresses, offsets, masks) and does not count; every floating-point
value counts, and so does an integer or a pointer made from one (a tile bitcast to int16 is still
the tile). What a program still holds when the next one starts is a fault: programs share nothing
but HBM. A value only a reference cycle keeps alive counts until Python collects it (the
interpreter makes none). Not seen: data turned into Python numbers (`int()` of a tensor, which no
GPU compiler takes) or rebuilt through branches on loaded scalars, and what is made and dropped
between two accesses.
"""

import gc
import os
import sys
import weakref
from collections import Counter
from contextlib import contextmanager

import numpy as np
from triton.runtime import interpreter

from sim.core.format import human_bytes
from sim.grading.triton import hints, liveness
from sim.grading.triton.induction import INDEX
from sim.grading.triton.loops import as_compiled
from sim.grading.triton.shadow import Buffer, MemoryFault, Shadow

NAMES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}


class Held:
    """The values of the running program, and the largest total of them seen (bytes, program, line)."""

    def __init__(self):
        self.values: list[weakref.ref] = []
        self.program = -1  # -1: the launch's arguments are being made
        self.peak = (0, -1, 0)

    def made(self, handle) -> None:
        """Every new handle: the launch's arguments are index arithmetic; a program's values are registered."""
        if self.program < 0:
            setattr(handle, INDEX, True)
        else:
            self.values.append(weakref.ref(handle))

    def built(self, result, args) -> None:
        """A builder operation's result is index arithmetic when it is not floating point and every handle it was
        made from is."""
        results = result if isinstance(result, tuple) else (result,)
        inputs = [a for arg in args for a in (arg if isinstance(arg, list | tuple) else (arg,))]
        if all(getattr(a, INDEX, False) for a in inputs if isinstance(a, interpreter.TensorHandle)):
            for r in results:
                if isinstance(r, interpreter.TensorHandle) and not r.dtype.is_floating():
                    setattr(r, INDEX, True)

    def bytes(self, besides=(), unheld=frozenset(), only=None) -> int:
        """The bytes of the program's live values that are not index arithmetic (nor `besides` themselves): each
        array they are views of counted once, whole (a transpose or a broadcast adds nothing), at the value's element
        width. An array one of `besides` is a view of still counts where another live value is a view of it too (red
        team 106: a zero tile split out of 16 joined ones, passed as a load's `other`, hid all 16). `unheld`: the ids
        of handles only dead names hold (`liveness`), not counted either; `only`: the ids of the handles counted,
        where given."""
        skip = {id(b) for b in besides} | unheld
        roots = {}  # what it counted, kept alive: their ids stay theirs
        alive, total = [], 0
        for ref in self.values:
            handle = ref()
            if handle is None:
                continue
            alive.append(ref)
            root = _root(handle.data)
            counted = id(handle) not in skip and (only is None or id(handle) in only)
            if not getattr(handle, INDEX, False) and counted and id(root) not in roots:
                roots[id(root)] = root
                width = 64 if handle.dtype.is_ptr() else handle.dtype.primitive_bitwidth
                total += -(-root.nbytes * width // (8 * np.asarray(handle.data).itemsize))
        self.values = alive
        return total

    def measure(self, line: int, *besides, unheld=frozenset(), only=None) -> None:
        """The program's values now, at `line`, but the access's own `besides` and `unheld`: a new peak if more than
        any before."""
        if (held := self.bytes(besides, unheld, only)) > self.peak[0]:
            self.peak = (held, self.program, line)

    def start(self, program: int) -> None:
        """The next program starts (`program`; -1 when the launch ends): MemoryFault if the last one left values."""
        if self.program >= 0 and self.bytes():
            gc.collect()
            if left := self.bytes():
                raise MemoryFault(
                    f"program {self.program} still held {human_bytes(left)} of values when it ended (kept in a "
                    f"global, an attribute or a default argument); programs share nothing but HBM"
                )
        self.values, self.program = [], program


def _root(data) -> np.ndarray:
    """The array `data` is a view of (itself if it owns its memory; Triton 3.6 holds some values as memoryviews)."""
    array = np.asarray(data)
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


class Record:
    """What one launch moved: bytes per (argument, "read"/"write", line), and what its programs held."""

    def __init__(self, shadow: Shadow, file: str):
        self.shadow = shadow
        self.file = os.path.realpath(file)
        with open(self.file, encoding="utf-8") as f:
            self.live = liveness.live(f.read())  # (function, line) → its live names
        self.moved: Counter = Counter()
        self.held = Held()

    @property
    def peak(self) -> tuple[int, int, int]:
        """The most any program held at a load, store, atomic add or tl.dot: (bytes, program, line)."""
        return self.held.peak

    def unheld(self) -> set[int]:
        """The handles only names dead where the kernel is hold (`liveness`)."""
        return liveness.named(self.file, self.live)[1]

    def _line(self) -> int:
        """The kernel's line that made this access (the innermost frame in the kernel's file)."""
        frame = sys._getframe()
        while frame is not None and os.path.realpath(frame.f_code.co_filename) != self.file:
            frame = frame.f_back
        return 0 if frame is None else frame.f_lineno

    def _place(self, ptrs, mask, verb: str):
        """The masked addresses' buffers and elements (MemoryFault for any outside the arguments)."""
        line = self._line()
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
        loaded = interpreter.TensorHandle(out, ptrs.get_element_ty())
        fill = other is not None and np.array_equal(other.data, np.full_like(other.data, other.data.flat[0]), True)
        self.held.measure(line, ptrs, mask, *([other] if fill else []), unheld=self.unheld())  # a fill: nothing
        return loaded

    def store(self, ptrs, value, mask, *flags, **named):
        """`tl.store`: the values under the mask into the private copy."""
        line, storage, chosen, which, element = self._place(ptrs, mask, "store")
        self.held.measure(line, ptrs, mask, unheld=self.unheld())
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
        returned = interpreter.TensorHandle(old, value.dtype.scalar)
        self.held.measure(line, ptrs, mask, unheld=self.unheld())
        return returned

    def refuse(self, *args):
        raise MemoryFault("atomic compare-and-swap is not graded; use tl.atomic_add")


def _index(self) -> int:
    """`tl.tensor.__index__` in the interpreter: a scalar argument is a one-element array there, which Triton 3.6's
    own `int(self.handle.data)` NumPy 2.5 refuses (only a 0-dimensional array converts): `range(0, Nk, BLOCK_N)`
    failed."""
    data = np.asarray(self.handle.data)
    return int(data.reshape(-1)[0]) if data.size == 1 else int(data)


def _traced(method, record: "Record", measured: bool):
    """A builder operation whose results `record.held` is told of (index arithmetic or not); `measured` (a product,
    `create_dot`): the program measured once it is made, where the tiles of a FlashAttention step meet (S_ij with
    Q_i, K_j, V_j, O_i: the listing's peak; with dead tiles not counted, no access sees S_ij)."""

    def run(*args, **named):
        result = method(*args, **named)
        record.held.built(result, (*args, *named.values()))
        if measured and record.held.program >= 0:  # the live names' values and the product (not the operands made
            kept = liveness.named(record.file, record.live)[0] | {id(result)}  # in its expression, fused on a GPU)
            record.held.measure(record._line(), only=kept)
        return result

    return run


@contextmanager
def recording(record: Record):
    """The interpreter for the launch: its builder's memory operations replaced by `record`'s, its other operations
    and every new `TensorHandle` reported to `record.held`, each program's start too (and where the interpreter
    patches `tl.tensor` for a launch, its `__index__` made to take a one-element array)."""
    builder, held, handle = interpreter.interpreter_builder, record.held, interpreter.TensorHandle
    post_init = handle.__post_init__
    hooks = {"create_masked_load": record.load, "create_masked_store": record.store,
             "create_atomic_rmw": record.atomic_rmw, "create_atomic_cas": record.refuse}  # fmt: skip
    for name in dir(builder):
        if name.startswith(("create_", "get_")) and name not in hooks:
            hooks[name] = _traced(getattr(builder, name), record, name == "create_dot")

    def program(x, y, z, set_grid_idx=builder.set_grid_idx):
        set_grid_idx(x, y, z)
        held.start(x)

    def made(value):
        post_init(value)
        held.made(value)

    for name, hook in (*hooks.items(), ("set_grid_idx", program)):
        setattr(builder, name, hook)
    handle.__post_init__ = made
    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if patch_tensor is not None:

        def patched(tensor, scope):
            patch_tensor(tensor, scope)  # the scope restores tensor's own attributes when the launch ends
            tensor.__index__ = _index

        interpreter._patch_lang_tensor = patched
    try:
        yield record
    finally:
        for name in (*hooks, "set_grid_idx"):
            delattr(builder, name)
        handle.__post_init__ = post_init
        if patch_tensor is not None:
            interpreter._patch_lang_tensor = patch_tensor


def launch(kernel, grid: tuple[int, ...], buffers: list[Buffer], scalars: list, constexprs: dict, file: str) -> Record:
    """Run `kernel[grid](*buffers, *scalars, **constexprs)` interpreted; its record (outputs stay in the buffers)."""
    record = Record(Shadow(buffers), file)
    with recording(record), as_compiled(kernel, file), hints.checked():
        try:
            kernel[grid](*buffers, *scalars, **constexprs)
        except interpreter.InterpreterError as e:
            cause = e
            while isinstance(cause, interpreter.InterpreterError) and cause.__cause__ is not None:
                cause = cause.__cause__  # wrapped once by the launch and once by each helper's call it came through
            raise cause from None
        record.held.start(-1)  # what the last program left
    return record
