"""The messages a submission's process may send the grader, and the check every one passes before it is used.

A frame from the child is trusted for nothing: its op must be one of `MESSAGES`, each field of
the right type (a name, a count, a tile range, a list of names; a violation's `what` one of the guard's
own lines, its detail at most `guard.MAX_DETAIL` characters), no field beyond those, the
number of arrays the op carries, and the arrays' bytes within `MAX_PAYLOAD` in all. Anything
else is a `wire.WireError`, which the grader reports as "malformed message: …" and which fails that
submission alone.
"""

from sim.grading import guard
from sim.grading.wire import WireError

MAX_PAYLOAD = 1 << 25  # bytes of arrays in one frame from a child (32 MiB): a tile, or a test's outputs
MAX_REQUESTS = 8 << 20  # bytes of JSON headers a child sends in one test (an honest master: < 0.5 MiB in all tests)
MAX_TEXT = 2000  # characters of any string a child sends (a message, a path it tried)
MAX_LIST = 256  # items of any list a child sends (buffer names, a shape)
MAX_INT = 1 << 53  # integers a child sends (byte counts, tile bounds)
# characters of CUDA source (assignment 5's device function) a child sends: as JSON at most 12 bytes each
# ("\ud83d\ude00"), so a frame that carries it stays within wire.MAX_HEADER
MAX_SOURCE = 4096


def _text(v) -> bool:
    return isinstance(v, str) and len(v) <= MAX_TEXT


def _what(v) -> bool:
    return isinstance(v, str) and v in guard.WHAT


def _detail(v) -> bool:
    return isinstance(v, str) and len(v) <= guard.MAX_DETAIL


def _count(v) -> bool:
    return type(v) is int and 0 <= v <= MAX_INT


def _tile(v) -> bool:
    return v is None or (isinstance(v, list) and len(v) == 2 and all(_count(x) for x in v))


def _texts(v) -> bool:
    return isinstance(v, list) and len(v) <= MAX_LIST and all(_text(x) for x in v)


def _counts(v) -> bool:
    return isinstance(v, list) and len(v) <= 4 and all(_count(x) for x in v)


def _peak(v) -> bool:
    return v is None or _count(v)


def _source(v) -> bool:
    return isinstance(v, str) and len(v) <= MAX_SOURCE


def _ms(v) -> bool:
    return type(v) in (int, float) and 0 <= v < 1e6


FAILURE = {"type": _text, "message": _text, "where": _text}
MESSAGES = {  # op → ({field: check}, how many arrays it carries: an exact number, or (least, most))
    "confined": ({"layers": _texts, "ms": _ms}, 0),
    "ready": ({}, 0),
    "import_failed": (FAILURE, 0),
    "raised": (FAILURE, 0),
    "done": ({"peak": _peak, "source": _source}, (0, 8)),
    "violation": ({"what": _what, "detail": _detail}, 0),
    "load": ({"buf": _text, "tensor": _text, "rows": _tile, "cols": _tile}, 0),
    "put": ({"buf": _text, "nbytes": _count, "replaces": _texts}, 0),
    "free": ({"bufs": _texts}, 0),
    "store": ({"tensor": _text, "rows": _tile, "cols": _tile, "buf": _text}, 1),
    "alloc": ({"name": _text, "shape": _counts, "dtype": _text}, 0),
}
OPTIONAL = {"where", "peak", "source", "rows", "cols", "replaces"}  # fields a message may leave out


def check(header: dict, arrays: list) -> None:
    """Refuse (WireError) a frame from a child that is not one of MESSAGES as described."""
    op = header.get("op")
    if op not in MESSAGES:
        raise WireError(f"op {str(op)[:40]!r} is not one a submission's process sends")
    fields, carries = MESSAGES[op]
    extra = sorted(set(header) - {"op", *fields})
    if extra:
        raise WireError(f"{op} has a field {str(extra[0])[:40]!r} it does not have")
    for name, ok in fields.items():
        if name not in header and name in OPTIONAL:
            continue
        if name not in header or not ok(header[name]):
            value = repr(header.get(name, "nothing"))[:60]
            raise WireError(f"{op}'s {name} is {value}")
    least, most = carries if isinstance(carries, tuple) else (carries, carries)
    if not least <= len(arrays) <= most:
        raise WireError(f"{op} carries {len(arrays)} arrays, not {carries}")
