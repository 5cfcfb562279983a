"""A trace file's shape, checked before the viewer reads a field of it: each refusal names the field that is wrong."""

import math

from sim.algorithms.registry import REGISTRY
from sim.core.dtypes import DTYPES
from sim.core.errors import InputError
from sim.machine.iomodel import Counts
from sim.machine.trace import MAX_SIZE, READS, SCHEMA, query_rows

TOP = {"schema", "version", "algorithm", "config", "hbm", "steps", "inputs", "output", "row"}
SIZES = ("n", "nk", "d", "block_rows", "block_cols", "sram_bytes")
MAX_FLOAT = 1.7976931348623157e308
MAX_COUNT = 2**62  # bytes, FLOPs or exponentials a closed form may count (4.6·10¹⁸: far past any run)
OPS = ("init", "load", "compute", "store", "skip", "exchange")  # `Chip.step`'s, by every listing
STEP_COUNTS = ("sram_bytes", "hbm_read_bytes", "hbm_write_bytes", "flops")
NONFINITE = ("Infinity", "-Infinity", "NaN")  # strict JSON's non-finite numbers, inside the values' lists
RING = "ring attention, device "  # one device of a ring: FlashAttention-2's steps, its closed form in the config


class Bad(Exception):
    """What is wrong with one field (said as `trace: malformed trace: …`)."""


def check(d) -> None:
    """Refuse, naming the field, a trace of flashsim's schema and a version it reads whose fields are not of the
    types and ranges a trace's are (other schemas and versions are left to `Trace.from_dict`'s refusal)."""
    if not isinstance(d, dict):
        raise InputError(f"trace: the file holds {_kind(d)}, not a trace (an object with schema {SCHEMA!r})")
    if d.get("schema") != SCHEMA or d.get("version") not in READS:
        return
    try:
        _check(d)
    except Bad as e:  # a name from the file may hold a new line or an escape: written out, one line
        said = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(e))
        raise InputError(f"trace: malformed trace: {said}") from None


def _check(d: dict) -> None:
    unknown = sorted(set(d) - TOP, key=str)
    if unknown:
        raise Bad(f"a field {str(unknown[0])[:40]!r} that no trace has")
    config = _object(_need(d, "config", "the trace"), "config")
    for name in SIZES:
        _int(_need(config, name, "config"), f"config {name}", 1)
    if not isinstance(_need(config, "dtype", "config"), str) and not (config["dtype"] is None and "sequence" in config):
        raise Bad(f"config dtype is {_shown(config['dtype'])}, not one of {', '.join(DTYPES)}")  # a name: the viewer's
    _algorithm(_need(d, "algorithm", "the trace"), config)
    _config(config)
    hbm = _object(_need(d, "hbm", "the trace"), "hbm")
    if not hbm:
        raise Bad("hbm is empty: a trace names the HBM tensors its steps move")
    for tensor, t in hbm.items():
        t = _object(t, f"hbm {tensor}")
        shape = _list(_need(t, "shape", f"hbm {tensor}"), f"hbm {tensor} shape")
        if not 1 <= len(shape) <= 2:
            raise Bad(f"hbm {tensor} shape is {_shown(shape)}, not 1 or 2 sizes")
        [_int(n, f"hbm {tensor} shape", 0) for n in shape]
        if not isinstance(_need(t, "dtype", f"hbm {tensor}"), str):
            raise Bad(f"hbm {tensor} dtype is {_shown(t['dtype'])}, not text")
    steps = _list(_need(d, "steps", "the trace"), "steps")
    rows = query_rows(config)  # packed GQA's: N per packed query head
    for k, step in enumerate(steps):
        step = _object(step, f"step {k}")
        _step(step, k, rows, hbm, {} if "sequence" in config else _shapes(hbm))
        if step.get("sram_bytes", 0) > config["sram_bytes"]:  # a chip refuses more (SRAMOverflowError)
            raise Bad(f"step {k} holds {step['sram_bytes']:,} bytes of SRAM, more than config sram_bytes")
    for name, value in _object(d.get("inputs") or {}, "inputs").items():
        _matrix(value, f"inputs {name}")
    if d.get("output") is not None:
        _matrix(d["output"], "output")
    if d.get("row") is not None:
        _int(d["row"], "row", 0, config["n"] - 1)
    _text(d)  # last: a field of the wrong type is named as such first


def _text(d: dict) -> None:
    """No text in the trace holds a control character (an escape sequence reached the terminal raw) nor a bracket
    (rich reads [/] as markup: a traceback, or a javascript: link in the --html export; red team 92)."""
    todo = [d]
    while todo:
        x = todo.pop()
        items = list(x.items()) if isinstance(x, dict) else [(None, v) for v in x] if isinstance(x, list) else []
        for key, value in items:
            for text in (key, value):
                if isinstance(text, str) and (set(text) & {"[", "]"} or not text.isprintable()):
                    raise Bad(f"holds the text {text[:40]!r}: brackets and control characters are not a trace's")
            if isinstance(value, dict | list):
                todo.append(value)


def _algorithm(name, config: dict) -> None:
    """A forward the registry holds, its backward, or one device of a ring (whose config carries its closed form)."""
    if not isinstance(name, str):
        raise Bad(f"algorithm is {_shown(name)}, not text")
    base = name.removesuffix(" backward")
    if base in REGISTRY and (base == name or REGISTRY[base].backward is not None):
        return
    if name.startswith(RING) and "sequence" in config and "closed_form" in config:
        return
    known = ", ".join(REGISTRY)
    raise Bad(f"algorithm {name[:40]!r} is not one flashsim simulates ({known}, each with ' backward')")


def _config(c: dict) -> None:
    """The settings the viewer reads: each of the type it reads it as."""
    if not isinstance(c.get("causal", False), bool):
        raise Bad(f"config causal is {_shown(c['causal'])}, not true or false")
    if c.get("scale") is not None:
        _finite(c["scale"], "config scale")
    if c.get("softcap") is not None and _finite(c["softcap"], "config softcap") <= 0:
        raise Bad(f"config softcap is {c['softcap']}, not above 0")
    if not isinstance(c.get("hardware"), str | None):
        raise Bad(f"config hardware is {_shown(c['hardware'])}, not a preset's name")
    for name in ("head", "seqlens", "window", "query_heads"):
        if c.get(name) is not None:
            [_int(x, f"config {name}", -MAX_SIZE) for x in _list(c[name], f"config {name}") if x is not None]
    if c.get("window") is not None and len(c["window"]) != 2:
        raise Bad(f"config window is {_shown(c['window'])}, not [left, right]")
    heads = c.get("query_heads")
    if heads is not None and not (
        len(heads) == 2 and all(isinstance(h, int) for h in heads) and 0 <= heads[0] <= heads[1]
    ):
        raise Bad(f"config query_heads is {_shown(heads)}, not [first, last] of a packed group (heads from 0)")
    for name in ("kv_head", "group", "sequence", "devices", "device"):
        if c.get(name) is not None:
            _int(c[name], f"config {name}", 0)
    if "kv_head" in c and not (isinstance(c.get("head"), list) and c["head"]):
        raise Bad("config kv_head is given without the query head (config head)")
    if "closed_form" in c:
        counts = _object(c["closed_form"], "config closed_form")
        if set(counts) != set(Counts.__dataclass_fields__):
            names = [_shown(name) for name in counts]
            held = ", ".join(names[:4]) + (f", … {len(names) - 4:,} more of {len(names):,}" if len(names) > 4 else "")
            raise Bad(f"config closed_form holds {held or 'nothing'}, not a closed form's counts")
        [_int(x, f"config closed_form {name}", 0, MAX_COUNT) for name, x in counts.items()]  # (red team 99: -33,280)


def _shapes(hbm: dict) -> dict[str, list[int]]:
    """Each HBM tensor's shape: the extent a tile of it lies in (a ring's hbm holds its last shard's: none)."""
    return {tensor: t["shape"] for tensor, t in hbm.items()}


def _step(s: dict, k: int, n: int, hbm: dict, extents: dict) -> None:
    where = f"step {k}"
    if _need(s, "index", where) != k or isinstance(s["index"], bool):
        raise Bad(f"{where} is numbered {_shown(s['index'])}")
    if _need(s, "op", where) not in OPS:
        raise Bad(f"{where} op is {_shown(s['op'])}, not one of {', '.join(OPS)}")
    if not isinstance(_need(s, "text", where), str) or not isinstance(s.get("phase"), str | None):
        raise Bad(f"{where} text or phase is not text")
    for name in ("i", "j", "line"):
        if s.get(name) is not None:
            _int(s[name], f"{where} {name}", 0)
    for name in STEP_COUNTS:
        _int(s.get(name, 0), f"{where} {name}", 0)
    if s.get("rows") is not None:
        rows = _list(s["rows"], f"{where} rows")
        if len(rows) != 2 or not 0 <= _int(rows[0], f"{where} rows", 0) <= _int(rows[1], f"{where} rows", 0) <= n:
            raise Bad(f"{where} rows is {_shown(rows)}, not [r0, r1] with 0 ≤ r0 ≤ r1 ≤ {n} (its query rows)")
    if s.get("code") is not None:
        code = _list(s["code"], f"{where} code")
        if len(code) != 2 or not isinstance(code[0], str):
            raise Bad(f"{where} code is {_shown(code)}, not [file, line]")
        _int(code[1], f"{where} code line", 0)
    for name in ("reads", "writes"):
        for a in _list(s.get(name, []), f"{where} {name}"):
            _access(a, f"{where} {name}", hbm, extents)
    for r in _list(s.get("sram", []), f"{where} sram"):
        r = _object(r, f"{where} sram")
        if not isinstance(_need(r, "name", f"{where} sram"), str):
            raise Bad(f"{where} sram name is {_shown(r['name'])}, not text")
        _int(_need(r, "nbytes", f"{where} sram {r['name']}"), f"{where} sram {r['name']} nbytes", 0)
        if r.get("source") is not None:
            _access(r["source"], f"{where} sram {r['name']} source", hbm, extents)
    if s.get("values") is not None:
        values = _object(s["values"], f"{where} values")
        if set(values) != {"before", "after"}:
            raise Bad(f"{where} values holds {_shown(list(values))}, not before and after")
        for when, buffers in values.items():
            for name, value in _object(buffers, f"{where} values {when}").items():
                _matrix(value, f"{where} values {when} {name}")


def _access(a, where: str, hbm: dict, extents: dict) -> None:
    """A tile moved: a tensor's name (one of the trace's HBM tensors, if it lists them), rows [r0, r1) and columns
    [c0, c1) inside it, its bytes, its level."""
    a = _object(a, where)
    for name, value in (("tensor", _need(a, "tensor", where)), ("level", a.get("level", "hbm"))):
        if not isinstance(value, str):
            raise Bad(f"{where} {name} is {_shown(value)}, not text")
    if a.get("level", "hbm") not in ("hbm", "l2"):
        raise Bad(f"{where} level is {_shown(a['level'])}, not hbm or l2")
    r0, r1, c0, c1 = (_int(_need(a, x, where), f"{where} {x}", 0) for x in ("r0", "r1", "c0", "c1"))
    if r0 > r1 or c0 > c1:
        raise Bad(f"{where} of {a['tensor']} spans rows {r0} … {r1}, columns {c0} … {c1}: an end before its start")
    _int(_need(a, "nbytes", where), f"{where} nbytes", 0)
    if hbm and a["tensor"] not in hbm:
        raise Bad(f"{where} moves {a['tensor'][:40]!r}, a tensor not in hbm ({', '.join(hbm)})")
    shape = extents.get(a["tensor"])
    if shape and (r1 > shape[0] or (len(shape) == 2 and c1 > shape[1])):
        raise Bad(f"{where} of {a['tensor']} spans rows {r0} … {r1}, columns {c0} … {c1}: outside its {shape}")
    unknown = sorted(set(a) - {"tensor", "r0", "r1", "c0", "c1", "nbytes", "level"})
    if unknown:
        raise Bad(f"{where} has a field {unknown[0][:40]!r} that no tile access has")


def _matrix(value, where: str) -> list[int]:
    """The shape of a number, a vector or a matrix of numbers, every row as long (strict JSON's non-finite strings
    allowed)."""
    if not isinstance(value, list):
        _number(value, where)
        return []
    shape = [len(value)]
    if value and all(isinstance(r, list) for r in value):
        if len({len(r) for r in value}) != 1:
            raise Bad(f"{where} is ragged: rows of {', '.join(sorted({str(len(r)) for r in value}))} numbers")
        shape, value = [len(value), len(value[0])], [x for r in value for x in r]
    for x in value:
        _number(x, where)
    return shape


def _number(x, where: str) -> None:
    if not ((isinstance(x, int | float) and not isinstance(x, bool)) or x in NONFINITE):
        raise Bad(f"{where} holds {_shown(x)} where a number goes")
    if isinstance(x, int) and abs(x) > MAX_FLOAT:  # 10**400: JSON's, not a float's (the viewer's OverflowError)
        raise Bad(f"{where} holds a number past float64's range")


def _finite(x, where: str) -> float:
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) > MAX_FLOAT:  # 10**400: isfinite's OverflowError
        raise Bad(f"{where} holds a number past float64's range")
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise Bad(f"{where} is {_shown(x)}, not a finite number")
    return x


def _int(x, where: str, low: int, high: int = MAX_SIZE) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or not low <= x <= high:
        most = f"{high:,} (as the command line)" if high == MAX_SIZE else f"{high:,}"
        raise Bad(f"{where} is {_shown(x)}, not a whole number from {low:,} to {most}")
    return x


def _need(d: dict, name: str, where: str):
    if name not in d:
        raise Bad(f"a field is missing: {where} has no {name}")
    return d[name]


def _object(x, where: str) -> dict:
    if not isinstance(x, dict):
        raise Bad(f"{where} is {_shown(x)}, not an object")
    return x


def _list(x, where: str) -> list:
    if not isinstance(x, list):
        raise Bad(f"{where} is {_shown(x)}, not a list")
    return x


def _shown(x) -> str:
    return repr(x)[:40] if isinstance(x, str) else str(x)[:40]


def _kind(x) -> str:
    return {list: "a list", str: "text", bool: "true or false", type(None): "null"}.get(type(x), "a number")
