"""The grader's pipe protocol: a frame is a JSON header plus the raw bytes of plain arrays, never a pickle.

Frame: two big-endian uint32 (header length, payload length), the UTF-8 JSON header, then the
payload, the arrays' bytes back to back. The header's "arrays" lists each array's dtype and shape;
the reader checks the dtype against a short list and the shapes against the payload's length, so
a message from the submission's process can carry numbers but never code.
"""

import json
import os
import struct
from collections import deque

import numpy as np

from sim.core.dtypes import DTYPES

PREFIX = struct.Struct(">II")
MAX_HEADER = 1 << 16  # bytes of JSON: names, shapes, a message
MAX_PAYLOAD = 1 << 28  # bytes of arrays in one frame (256 MiB)
ARRAY_DTYPES = {str(dt): dt for dt in (*DTYPES.values(), np.dtype(np.float64), np.dtype(np.int64))}


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
    try:
        header = json.loads(head.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise WireError(f"header is not JSON ({e})") from None
    if not isinstance(header, dict) or not isinstance(header.get("op"), str):
        raise WireError("header is not an object with an 'op'")
    specs = header.pop("arrays", [])
    arrays, offset = [], 0
    if not isinstance(specs, list):
        raise WireError("'arrays' is not a list")
    for spec in specs:
        if not (isinstance(spec, list) and len(spec) == 2 and spec[0] in ARRAY_DTYPES and isinstance(spec[1], list)):
            raise WireError(f"array spec {str(spec)[:80]} is not [dtype, shape] with an allowed dtype")
        dtype, shape = ARRAY_DTYPES[spec[0]], spec[1]
        if len(shape) > 4 or not all(isinstance(n, int) and 0 <= n < 1 << 31 for n in shape):
            raise WireError(f"array shape {str(shape)[:80]} is not up to 4 non-negative integers")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset + nbytes > len(payload):
            raise WireError("arrays are longer than the payload")
        arrays.append(
            np.frombuffer(payload, dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape).copy()
        )
        offset += nbytes
    if offset != len(payload):
        raise WireError("payload is longer than its arrays")
    return header, arrays


class Reader:
    """Cuts frames out of the bytes read from a pipe, in the order they arrive."""

    def __init__(self, max_payload: int = MAX_PAYLOAD):
        self.buffer = bytearray()
        self.max_payload = max_payload
        self.ready: deque[tuple[dict, list[np.ndarray]]] = deque()

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
            payload = bytes(self.buffer[PREFIX.size + n_head : end])
            del self.buffer[:end]
            self.ready.append(decode(head, payload))

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
