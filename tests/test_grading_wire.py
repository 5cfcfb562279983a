"""The pipe protocol: arrays round-trip exactly; malformed frames from a submission are refused, never unpickled."""

import json
import re
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.grading import schema, wire
from sim.grading.server import ChipServer


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
        (frame({"op": "done", "arrays": [["float64", [0] + [2**31 - 1] * 3]]}), "cannot be made"),  # was ValueError
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


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
OPS = st.sampled_from([*schema.MESSAGES, "tile", "hello", ""])


@st.composite
def frames(draw) -> bytes:
    """A frame whose header is a real op with fields drawn at random (real names, real or wild values), its arrays
    specs wild or right, its payload any bytes — or bytes with no structure at all."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    op = draw(OPS)
    fields = schema.MESSAGES.get(op, ({}, 0))[0]
    header = {"op": op} | {k: draw(JSON) for k in fields if draw(st.booleans())}
    header |= draw(st.dictionaries(st.text(max_size=6), JSON, max_size=2))
    if draw(st.booleans()):
        header["arrays"] = draw(st.lists(st.lists(JSON, max_size=3) | st.tuples(
            st.sampled_from(["float32", "float64", "int64", "object"]), st.lists(st.integers(-2, 2**40), max_size=5)
        ).map(list), max_size=3))  # fmt: skip
    head = json.dumps(header).encode()
    payload = draw(st.binary(max_size=64))
    return struct.pack(">II", len(head), len(payload)) + head + payload


@settings(max_examples=400, deadline=None)
@given(st.lists(frames(), min_size=1, max_size=4), st.integers(1, 50))
def test_the_graders_reader_only_ever_refuses_with_a_wire_error(data, piece):
    """Whatever a child writes, the grader's reader yields frames that pass the schema or raises WireError —
    nothing else, whatever the bytes and however they are cut."""
    reader, stream = wire.Reader(schema.MAX_PAYLOAD, schema.check), b"".join(data)
    try:
        for i in range(0, len(stream), piece):
            reader.feed(stream[i : i + piece])
    except wire.WireError:
        return
    for header, arrays in reader.ready:
        fields = schema.MESSAGES[header["op"]][0]
        assert set(header) <= {"op", *fields}
        assert all(isinstance(a, np.ndarray) and str(a.dtype) in wire.ARRAY_DTYPES for a in arrays)


@pytest.mark.parametrize(
    "header, arrays, message",
    [
        ({"op": "raised", "type": "ValueError"}, [], "raised's message is 'nothing'"),
        ({"op": "done", "peak": "1 GiB"}, [], "done's peak is '1 GiB'"),
        ({"op": "done", "peak": True}, [], "done's peak is True"),
        ({"op": "load", "buf": "Q_i", "tensor": "Q", "rows": [0, -1]}, [], "load's rows is [0, -1]"),
        ({"op": "put", "buf": "x", "nbytes": 2**60}, [], f"put's nbytes is {2**60}"),
        ({"op": "store", "tensor": "O", "buf": "O_i"}, [], "store carries 0 arrays, not 1"),
        ({"op": "free", "bufs": ["a"] * 300}, [], "free's bufs is"),
        ({"op": "ready", "extra": 1}, [], "ready has a field 'extra' it does not have"),
        ({"op": "tile"}, [], "op 'tile' is not one a submission's process sends"),
    ],
)
def test_a_message_outside_the_schema_is_refused_with_what_is_wrong(header, arrays, message):
    with pytest.raises(wire.WireError, match=re.escape(message)):
        schema.check(header, arrays)


def test_deep_nesting_and_an_overflowing_shape_are_wire_errors_not_crashes():
    with pytest.raises(wire.WireError, match="deeper than 8"):
        wire.Reader().feed(frame({"op": "done", "peak": [[[[[[[[[[0]]]]]]]]]]}))
    deep = b'{"op": "x", "a": ' + b"[" * 30000 + b"]" * 30000 + b"}"
    with pytest.raises(wire.WireError, match="deeper than 8"):
        wire.Reader().feed(struct.pack(">II", len(deep), 0) + deep)
    assert wire.depth(b'{"a": "[[[[", "b": [{"c": "\\"]]["}]}') == 3  # brackets inside strings do not count
    with pytest.raises(wire.WireError, match="longer than the payload"):
        wire.Reader().feed(frame({"op": "x", "arrays": [["float64", [2**30] * 4]]}, b"\0" * 8))


def test_a_frame_from_a_child_is_capped_far_below_what_the_grader_sends():
    big = struct.pack(">II", 10, schema.MAX_PAYLOAD + 1)
    with pytest.raises(wire.WireError, match="over the limit"):
        wire.Reader(schema.MAX_PAYLOAD, schema.check).feed(big)
    assert schema.MAX_PAYLOAD == 32 << 20 < wire.MAX_PAYLOAD


NAMES = st.sampled_from(["Q", "K", "V", "O", "ℓ", "m", "Q_i", "x", "", "a" * 65])
COUNTS = st.integers(0, schema.MAX_INT)
TILES = st.none() | st.lists(COUNTS, min_size=2, max_size=2)
REQUESTS = st.one_of(
    st.fixed_dictionaries({"op": st.just("load"), "buf": NAMES, "tensor": NAMES, "rows": TILES, "cols": TILES}),
    st.fixed_dictionaries({"op": st.just("put"), "buf": NAMES, "nbytes": COUNTS, "replaces": st.lists(NAMES)}),
    st.fixed_dictionaries({"op": st.just("free"), "bufs": st.lists(NAMES, max_size=3)}),
    st.fixed_dictionaries({"op": st.just("store"), "tensor": NAMES, "buf": NAMES, "rows": TILES, "cols": TILES}),
    st.fixed_dictionaries({"op": st.just("alloc"), "name": NAMES, "shape": st.lists(COUNTS, max_size=4),
                           "dtype": st.sampled_from(["float16", "float32", "bfloat16", "int64", "x"])}),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(REQUESTS, st.integers(0, 3), st.integers(0, 20)), max_size=8))
def test_the_chip_server_answers_any_request_that_passes_the_schema_without_raising(requests):
    """Requests the schema lets through, with wild names, ranges and sizes: the server replies or records a one-line
    error for the test; nothing escapes it."""
    rng = np.random.default_rng(0)
    server = ChipServer(1 << 14, {"Q": rng.standard_normal((20, 4)).astype(np.float32), "K": np.ones((9, 4))})
    for header, rows, cols in requests:
        arrays = [np.zeros((rows, cols), np.float32)] if header["op"] == "store" else []
        schema.check(header, arrays)
        reply = server.handle(header, arrays)
        assert reply is None or reply[0]["op"] in ("tile", "refused")
        assert server.error is None or ("\n" not in server.error and len(server.error) < 400)


def nesting(value) -> int:
    """How deep a parsed JSON value's lists and objects nest: the reference `wire.depth` is held to."""
    if isinstance(value, list | dict):
        return 1 + max(map(nesting, value.values() if isinstance(value, dict) else value), default=0)
    return 0


TRICKY = st.text(alphabet='[]{}"\\\n\t a/é\u2028', max_size=12)  # what a string may hold that looks like JSON's syntax
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TRICKY,
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY, inner, max_size=4),
                      max_leaves=30)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(value=VALUES, ascii_only=st.booleans(), indent=st.sampled_from([None, 0, 2]))
def test_depth_of_any_json_text_is_its_parsed_nesting(value, ascii_only, indent):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    assert json.loads(text) == value  # the text is the value's JSON
    assert wire.depth(text, cap=10**6) == nesting(value)
    assert wire.depth(text) == min(nesting(value), wire.MAX_DEPTH + 1)  # stopped at the cap


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet='[]{}"\\ ,:0a', max_size=40))
def test_depth_of_any_text_json_parses_is_its_nesting(text):
    """Random strings of JSON's syntax: each one json.loads takes nests as deep as depth says."""
    try:
        value = json.loads(text)
    except ValueError:
        return
    assert wire.depth(text.encode(), cap=10**6) == nesting(value)


class Counted:
    """A header that counts the bytes read of it, and can be read no other way (no regex, no buffer)."""

    def __init__(self, data: bytes):
        self.data, self.reads = data, 0

    def __iter__(self):
        for c in self.data:
            self.reads += 1
            yield c


def test_depth_reads_a_crafted_64_kib_header_once_byte_by_byte():
    """Red team H1: a 64 KiB header of escaped quotes, never closed, cost the regex that skipped strings ~26 s of the
    grader's GIL (each quote began a string scanned to the end); depth now reads each byte once."""
    crafted = b"[[[" + b'\\"' * ((wire.MAX_HEADER - 3) // 2)
    assert wire.depth(crafted) == 3  # the quote opens a string that never ends: nothing after it counts
    head = Counted(crafted)
    assert wire.depth(head) == 3 and head.reads == len(crafted)
    head = Counted(b"[" * wire.MAX_HEADER)
    assert wire.depth(head) == wire.MAX_DEPTH + 1 and head.reads == wire.MAX_DEPTH + 1  # stopped past the cap
    assert wire.depth(b'"\\\\"[[') == 2  # an escaped backslash escapes no quote
