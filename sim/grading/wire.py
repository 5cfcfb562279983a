"""The grader's pipe protocol: a frame is a JSON header plus the raw bytes of plain arrays, never a pickle.

Frame: two big-endian uint32 (header length, payload length), the UTF-8 JSON header, then the
payload, the arrays' bytes back to back. The header's "arrays" lists each array's dtype and shape;
the reader checks the dtype against a short list and the shapes against the payload's length, so
a message from the submission's process can carry numbers but never code.
"""

import json
import math
import os
import struct
from collections import deque

import numpy as np

from sim.core.dtypes import DTYPES

PREFIX = struct.Struct(">II")
MAX_HEADER = 1 << 16  # bytes of JSON: names, shapes, a message
MAX_PAYLOAD = 1 << 28  # bytes of arrays in one frame (256 MiB): what the grader sends (a GPU test's inputs)
MAX_DEPTH = 8  # nesting of the JSON header's lists and objects; deeper is refused before it is parsed
ARRAY_DTYPES = {str(dt): dt for dt in (*DTYPES.values(), np.dtype(np.float64), np.dtype(np.int64))}
_QUOTE, _BACKSLASH, _OPEN, _CLOSE = ord('"'), ord("\\"), (ord("["), ord("{")), (ord("]"), ord("}"))


class WireError(Exception):
    """A frame that breaks the protocol: too long, not JSON, an array dtype or shape that does not add up."""


def encode(header: dict, arrays=()) -> bytes:
    """One frame: `header` (JSON-ready) and `arrays` (C-contiguous copies of each)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    for a in arrays:
        if str(a.dtype) not in ARRAY_DTYPES:
            raise WireError(f"array dtype {a.dtype} cannot be sent; allowed: {', '.join(ARRAY_DTYPES)}")
    head = json.dumps({**header, "arrays": [[str(a.dtype), list(a.shape)] for a in arrays]}).encode()
    payload = b"".join(a.tobytes() for a in arrays)
    return PREFIX.pack(len(head), len(payload)) + head + payload


def decode(head: bytes, payload: bytes) -> tuple[dict, list[np.ndarray]]:
    """The header and arrays of one frame's parts, each array checked against the allowed dtypes and the payload."""
    if depth(head) > MAX_DEPTH:
        raise WireError(f"header nests lists or objects deeper than {MAX_DEPTH}")
    try:
        header = json.loads(head.decode(), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise WireError(f"header is not JSON ({str(e)[:100]})") from None
    if not isinstance(header, dict) or not isinstance(header.get("op"), str):
        raise WireError("header is not an object with an 'op'")
    specs = header.pop("arrays", [])
    arrays, offset = [], 0
    if not isinstance(specs, list):
        raise WireError("'arrays' is not a list")
    for spec in specs:
        if not (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and spec[0] in ARRAY_DTYPES
                and isinstance(spec[1], list)):  # fmt: skip
            raise WireError(f"array spec {str(spec)[:80]} is not [dtype, shape] with an allowed dtype")
        dtype, shape = ARRAY_DTYPES[spec[0]], spec[1]
        if len(shape) > 4 or not all(type(n) is int and 0 <= n < 1 << 31 for n in shape):
            raise WireError(f"array shape {str(shape)[:80]} is not up to 4 non-negative integers")
        nbytes = math.prod(shape) * dtype.itemsize  # Python's integers: a product cannot overflow
        if offset + nbytes > len(payload):
            raise WireError("arrays are longer than the payload")
        try:  # an empty array of huge other sides ([0, 2**31 - 1, …]) is one NumPy cannot shape
            arrays.append(
                np.frombuffer(payload, dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape).copy()
            )
        except ValueError as e:
            raise WireError(f"array shape {str(shape)[:80]} cannot be made ({str(e)[:80]})") from None
        offset += nbytes
    if offset != len(payload):
        raise WireError("payload is longer than its arrays")
    return header, arrays


def depth(head: bytes, cap: int = MAX_DEPTH) -> int:
    """How deep the JSON text's lists and objects nest (brackets inside strings not counted), read without parsing:
    one pass over its bytes, each read once, stopped at the first bracket that nests deeper than `cap`."""
    level = deepest = 0
    inside = escaped = False  # in a string; the byte before was its backslash
    for c in head:
        if inside:
            if escaped:
                escaped = False
            elif c == _BACKSLASH:
                escaped = True
            elif c == _QUOTE:
                inside = False
        elif c == _QUOTE:
            inside = True
        elif c in _OPEN:
            level += 1
            deepest = max(deepest, level)
            if deepest > cap:
                break
        elif c in _CLOSE:
            level -= 1
    return deepest


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


class Reader:
    """Cuts frames out of the bytes read from a pipe, in the order they arrive."""

    def __init__(self, max_payload: int = MAX_PAYLOAD, check=None):
        self.buffer = bytearray()
        self.max_payload, self.check = max_payload, check  # check(header, arrays) raises WireError to refuse a frame
        self.ready: deque[tuple[dict, list[np.ndarray]]] = deque()
        self.header_bytes = 0  # of every frame cut so far: its reader's owner may reset and cap it

    def feed(self, data: bytes) -> None:
        """Add bytes read from the pipe; the frames they complete join `ready`."""
        self.buffer += data
        while len(self.buffer) >= PREFIX.size:
            n_head, n_payload = PREFIX.unpack_from(self.buffer)
            if n_head > MAX_HEADER or n_payload > self.max_payload:
                raise WireError(f"a frame of {n_head:,} + {n_payload:,} bytes is over the limit")
            end = PREFIX.size + n_head + n_payload
            if len(self.buffer) < end:
                break
            head = bytes(self.buffer[PREFIX.size : PREFIX.size + n_head])
            self.header_bytes += n_head
            payload = bytes(self.buffer[PREFIX.size + n_head : end])
            del self.buffer[:end]
            header, arrays = decode(head, payload)
            if self.check is not None:
                self.check(header, arrays)
            self.ready.append((header, arrays))

    def receive(self, fd: int) -> tuple[dict, list[np.ndarray]]:
        """The next frame, reading from `fd` until one is whole (EOFError if the pipe closes first)."""
        while not self.ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError("the other end closed the pipe")
            self.feed(chunk)
        return self.ready.popleft()


def send(fd: int, header: dict, arrays=()) -> None:
    """Write one frame to a file descriptor, all of it."""
    data = memoryview(encode(header, arrays))
    while data:
        data = data[os.write(fd, data) :]
