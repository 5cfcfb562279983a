"""The pipe protocol: arrays round-trip exactly; malformed frames from a submission are refused, never unpickled."""

import json
import struct

import ml_dtypes
import numpy as np
import pytest

from sim.grading import wire


def frame(header: dict, payload: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack(">II", len(head), len(payload)) + head + payload


def test_arrays_of_every_storage_dtype_round_trip_bit_for_bit():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 5)).astype(dt) for dt in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)]
    arrays.append(np.array([-np.inf, np.nan, 0.0, np.inf], np.float32))
    reader = wire.Reader()
    data = wire.encode({"op": "tile", "nbytes": 7}, arrays)
    for i in range(0, len(data), 5):  # arriving in small pieces
        reader.feed(data[i : i + 5])
    ((header, got),) = reader.ready
    assert header == {"op": "tile", "nbytes": 7}
    for a, b in zip(arrays, got, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize(
    "data, message",
    [
        (frame({"op": "x", "arrays": [["object", [1]]]}, b"12345678"), "allowed dtype"),
        (frame({"op": "x", "arrays": [["float32", [4]]]}, b"\0" * 8), "longer than the payload"),
        (frame({"op": "x", "arrays": [["float32", [1]]]}, b"\0" * 8), "payload is longer"),
        (frame({"op": "x", "arrays": [["float32", [-1]]]}), "non-negative"),
        (frame({"no": "op"}), "with an 'op'"),
        (struct.pack(">II", 3, 0) + b"\x80\x04]", "not JSON"),  # a pickle's opening bytes
        (struct.pack(">II", 1 << 20, 0), "over the limit"),
    ],
)
def test_malformed_frames_are_refused(data, message):
    with pytest.raises(wire.WireError, match=message):
        wire.Reader().feed(data)


def test_a_frame_is_cut_where_it_ends_and_the_next_one_waits():
    reader = wire.Reader()
    a, b = wire.encode({"op": "a"}), wire.encode({"op": "b"}, [np.arange(3.0)])
    reader.feed(a + b[:-4])
    assert [h["op"] for h, _ in reader.ready] == ["a"]
    reader.feed(b[-4:])
    assert [h["op"] for h, _ in reader.ready] == ["a", "b"] and reader.ready[1][1][0].tolist() == [0.0, 1.0, 2.0]
