"""The step-by-step record of a simulated run, and its versioned JSON form."""

import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from sim.core import strict_json
from sim.core.atomic_file import write_text
from sim.core.errors import InputError

SCHEMA = "flashsim.trace"
VERSION = 3  # 2: each step names the listing's code that ran it (`Step.code`); 3: strict JSON ("-Infinity")
READS = (1, 2, 3)  # the versions `from_dict` reads
MAX_SIZE = 2**53  # the largest size a trace may claim, as on the command line (`sim.cli.options.POSITIVE`)
KEY_TENSORS = frozenset({"K", "V", "dK", "dV"})  # HBM tensors indexed by key rows; the others by query rows


@dataclass(frozen=True, slots=True)
class Access:
    """One tile moved between HBM and SRAM: rows [r0, r1) and columns [c0, c1) of `tensor`."""

    tensor: str
    r0: int
    r1: int
    c0: int
    c1: int
    nbytes: int
    level: str = "hbm"  # "l2" for the re-reads Theorem 2's standard-attention count assumes are free


@dataclass(frozen=True, slots=True)
class Resident:
    """A buffer in SRAM after a step: its name, size, and the HBM tile it came from (if any)."""

    name: str
    nbytes: int
    source: Access | None = None


@dataclass(slots=True)
class Step:
    """One line of the paper's algorithm, executed once (for one tile pair i, j where it has them)."""

    index: int
    op: str  # "init", "load", "compute" or "store"
    line: int | None  # the line of the paper's algorithm listing
    text: str
    i: int | None = None
    j: int | None = None
    phase: str | None = None  # which kernel of a multi-kernel algorithm (standard attention)
    code: tuple[str, int] | None = None  # the listing's file (relative to sim/) and line that ran the step
    rows: tuple[int, int] | None = None  # the query rows [r0, r1) the step works on, where it has them
    reads: list[Access] = field(default_factory=list)
    writes: list[Access] = field(default_factory=list)
    sram: list[Resident] = field(default_factory=list)  # resident after the step
    sram_bytes: int = 0  # occupancy after the step
    hbm_read_bytes: int = 0  # running totals after the step
    hbm_write_bytes: int = 0
    flops: int = 0  # running matmul FLOPs after the step
    values: dict | None = None  # record="values": {"before": {buf: ...}, "after": {buf: ...}}

    @property
    def tile(self) -> tuple:
        """(phase, i, j): the steps of one tile pair share it."""
        return self.phase, self.i, self.j


@dataclass
class Trace:
    """What a run did, step by step, with enough context to replay it on screen."""

    algorithm: str
    config: dict
    hbm: dict  # tensor -> {"shape": [...], "dtype": "..."}
    steps: list[Step] = field(default_factory=list)
    inputs: dict | None = None  # q, k, v as nested lists (record="values")
    output: list | None = None
    row: int | None = None  # values were recorded for this query row only (None: every row)

    def to_dict(self) -> dict:
        """The JSON-ready form, with schema name and version (shares the values' lists with the trace)."""
        d = {"schema": SCHEMA, "version": VERSION}
        d.update({f.name: getattr(self, f.name) for f in fields(self)})
        d["steps"] = [_step_dict(s) for s in self.steps]
        return d

    def save(self, path: str | Path) -> None:
        """Write the trace as strict JSON (`sim.core.strict_json`), atomically (`sim.core.atomic_file`)."""
        write_text(path, strict_json.dumps(self.to_dict()))

    def only_row(self, row: int) -> "Trace":
        """This trace with each step's values cut down to query row `row` (see `row_values`)."""
        if self.row == row:
            return self
        if self.row is not None:
            raise InputError(f"row: this trace holds the values of row {self.row} only, not row {row}")
        steps = [replace(s, values=row_values(s.values, s.rows, row)) for s in self.steps]
        return replace(self, steps=steps, row=row)

    @classmethod
    def from_dict(cls, d: dict) -> "Trace":
        """Rebuild a trace from `to_dict`'s form; refuses other schemas and versions."""
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise InputError(f"trace: not a flashsim trace (expected schema {SCHEMA!r})")
        if d.get("version") not in READS:
            versions = ", ".join(map(str, READS[:-1])) + f" and {READS[-1]}"
            raise InputError(f"trace: version {d.get('version')!r} is not supported (this flashsim reads {versions})")
        try:
            steps = [_step_from_dict(s) for s in d["steps"]]
            for k, step in enumerate(steps):
                if step.index != k:
                    raise ValueError(f"step {k} is numbered {step.index}")
            config, hbm = _config(d["config"]), _hbm(d["hbm"])
            for tensor, rows in (("Q", query_rows(config)), ("K", config["nk"])):
                held = hbm[tensor]["shape"][:1] if tensor in hbm else [rows]
                piece = "sequence" in config and held[0] <= rows  # a ring device's last piece (zigzag: half its rows)
                if held != [rows] and not piece:
                    raise ValueError(f"hbm {tensor} has {held} rows, the config {rows}")
            return cls(
                algorithm=_typed(d["algorithm"], str, "algorithm"),
                config=config,
                hbm=hbm,
                steps=steps,
                inputs=strict_json.revive(d.get("inputs")),
                output=strict_json.revive(d.get("output")),
                row=_typed(d.get("row"), int, "row", optional=True),
            )
        except KeyError as e:
            raise InputError(f"trace: malformed trace: a field is missing ({e})") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise InputError(f"trace: malformed trace: {e}") from None

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        """Read a trace written by `save`."""
        try:
            d = json.loads(Path(path).read_text())
        except OSError as e:
            raise InputError(f"trace: cannot read {str(path)!r}: {e.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"trace: {str(path)!r} is not valid JSON ({e})") from None
        return cls.from_dict(d)


def query_rows(config: dict) -> int:
    """Rows of Q in HBM: N, or N per query head of a packed GQA group (config query_heads = [first, last])."""
    heads = config.get("query_heads")
    return config["n"] * (heads[1] - heads[0] + 1 if isinstance(heads, list) and len(heads) == 2 else 1)


def row_values(values: dict | None, rows: tuple[int, int] | None, row: int) -> dict | None:
    """A step's values for one query row: row `row` of each buffer indexed by the step's query rows.

    Buffers are nested lists or NumPy arrays. A buffer named `…_j` is indexed by key rows
    and left out, as is any buffer whose length is not the step's row count; a step whose
    rows exclude `row` has no values.
    """
    if values is None or rows is None or not rows[0] <= row < rows[1]:
        return None
    r0, n = rows[0], rows[1] - rows[0]

    def keep(name: str, v) -> bool:
        return not name.endswith("_j") and hasattr(v, "__len__") and getattr(v, "ndim", 1) > 0 and len(v) == n

    return {when: {name: v[row - r0] for name, v in bufs.items() if keep(name, v)} for when, bufs in values.items()}


_ACCESS_FIELDS = [f.name for f in fields(Access)]
_STEP_FIELDS = [f.name for f in fields(Step)]


def _access_dict(a: Access | None) -> dict | None:
    return None if a is None else {name: getattr(a, name) for name in _ACCESS_FIELDS}


def _step_dict(s: Step) -> dict:
    d = {name: getattr(s, name) for name in _STEP_FIELDS}
    d["reads"] = [_access_dict(a) for a in s.reads]
    d["writes"] = [_access_dict(a) for a in s.writes]
    d["sram"] = [{"name": r.name, "nbytes": r.nbytes, "source": _access_dict(r.source)} for r in s.sram]
    d["rows"] = None if s.rows is None else list(s.rows)
    d["code"] = None if s.code is None else list(s.code)
    return d


def _typed(value, kind, where: str, optional: bool = False):
    if (value is None and optional) or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise TypeError(f"{where} is {value!r}, expected {kind.__name__}")


def _config(c: dict) -> dict:
    for name in ("n", "nk", "d", "block_rows", "block_cols", "sram_bytes"):
        if not 1 <= _typed(c[name], int, f"config {name}") <= MAX_SIZE:
            raise ValueError(
                f"config {name} is {c[name]}, expected an integer from 1 to {MAX_SIZE:,} (as the command line)"
            )
    _typed(c["dtype"], str, "config dtype")
    return c


def _hbm(h: dict) -> dict:
    for tensor, t in _typed(h, dict, "hbm").items():
        for n in _typed(t["shape"], list, f"hbm {tensor} shape"):
            _typed(n, int, f"hbm {tensor} shape")
        _typed(t["dtype"], str, f"hbm {tensor} dtype")
    return h


def _access(a: dict) -> Access:
    a = Access(**a)
    for name in ("r0", "r1", "c0", "c1", "nbytes"):
        _typed(getattr(a, name), int, f"access {name}")
    _typed(a.tensor, str, "access tensor")
    return a


def _step_from_dict(s: dict) -> Step:
    s = dict(s)
    for name in ("index", "sram_bytes", "hbm_read_bytes", "hbm_write_bytes", "flops"):
        _typed(s.get(name, 0), int, f"step {name}")
    for name in ("i", "j", "line"):
        _typed(s.get(name), int, f"step {name}", optional=True)
    _typed(s["op"], str, "step op")
    _typed(s["text"], str, "step text")
    s["reads"] = [_access(a) for a in s.get("reads", [])]
    s["writes"] = [_access(a) for a in s.get("writes", [])]
    s["sram"] = [
        Resident(
            r["name"], _typed(r["nbytes"], int, "resident nbytes"), _access(r["source"]) if r.get("source") else None
        )
        for r in s.get("sram", [])
    ]
    if s.get("values") is not None:
        for when in ("before", "after"):
            _typed(s["values"][when], dict, f"step values[{when!r}]")
        s["values"] = {when: strict_json.revive(s["values"][when]) for when in ("before", "after")}
    if s.get("rows") is not None:
        r0, r1 = s["rows"]
        s["rows"] = (_typed(r0, int, "step rows"), _typed(r1, int, "step rows"))
    if s.get("code") is not None:  # version 1 has none
        file, line = s["code"]
        s["code"] = (_typed(file, str, "step code"), _typed(line, int, "step code"))
    return Step(**s)
