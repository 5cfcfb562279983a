"""The step-by-step record of a simulated run, and its versioned JSON form."""

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sim.errors import InputError

SCHEMA = "flashsim.trace"
VERSION = 1


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
    reads: list[Access] = field(default_factory=list)
    writes: list[Access] = field(default_factory=list)
    sram: list[Resident] = field(default_factory=list)  # resident after the step
    sram_bytes: int = 0  # occupancy after the step
    hbm_read_bytes: int = 0  # running totals after the step
    hbm_write_bytes: int = 0
    flops: int = 0  # running matmul FLOPs after the step
    values: dict | None = None  # record="values": {"before": {buf: ...}, "after": {buf: ...}}


@dataclass
class Trace:
    """What a run did, step by step, with enough context to replay it on screen."""

    algorithm: str
    config: dict
    hbm: dict  # tensor -> {"shape": [...], "dtype": "..."}
    steps: list[Step] = field(default_factory=list)
    inputs: dict | None = None  # q, k, v as nested lists (record="values")
    output: list | None = None

    def to_dict(self) -> dict:
        """The JSON-ready form, with schema name and version."""
        d = {"schema": SCHEMA, "version": VERSION}
        d.update(asdict(self))
        return d

    def save(self, path: str | Path) -> None:
        """Write the trace as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), allow_nan=True))

    @classmethod
    def from_dict(cls, d: dict) -> "Trace":
        """Rebuild a trace from `to_dict`'s form; refuses other schemas and versions."""
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise InputError(f"trace: not a flashsim trace (expected schema {SCHEMA!r})")
        if d.get("version") != VERSION:
            raise InputError(f"trace: version {d.get('version')!r} is not supported (this flashsim reads {VERSION})")
        try:
            steps = [_step_from_dict(s) for s in d["steps"]]
            return cls(
                algorithm=d["algorithm"],
                config=d["config"],
                hbm=d["hbm"],
                steps=steps,
                inputs=d.get("inputs"),
                output=d.get("output"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"trace: malformed trace ({type(e).__name__}: {e})") from None

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


def _access(a: dict) -> Access:
    return Access(**a)


def _step_from_dict(s: dict) -> Step:
    s = dict(s)
    s["reads"] = [_access(a) for a in s.get("reads", [])]
    s["writes"] = [_access(a) for a in s.get("writes", [])]
    s["sram"] = [
        Resident(r["name"], r["nbytes"], _access(r["source"]) if r.get("source") else None) for r in s.get("sram", [])
    ]
    return Step(**s)
