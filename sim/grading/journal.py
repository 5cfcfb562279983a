"""A grading run's journal: one JSON line per graded submission, so an interrupted batch resumes where it stopped.

The first line records what the grades depend on: the assignment, the sha256 of its master's bytes and of the
grader's own code (`grader_digest`), the tests graded (a --self-check's are the public ones), the child's limits,
whether the tests could run here, and the seed; each later line is one submission's report, appended and flushed
to disk as soon as it is graded. Started again
with the same journal, the grader keeps those reports and grades only the submissions without one, on the same
seed's cases; a journal whose first line differs from the run's is refused, naming what differs. A last line cut
short (the grader was stopped while writing it) is dropped, said so on stderr: its submission is graded again.

Each report's line also holds the sha256 of the submission's bytes (`submission_file.read`'s; "" for a file it
refuses): a submission whose file differs now is graded again, and said so on stderr. A line without one (a journal
written before) is kept as it is.
"""

import hashlib
import json
import math
import os
import re
import sys
from dataclasses import asdict, fields
from functools import cache
from pathlib import Path

from sim.core.atomic_file import read_regular
from sim.core.errors import InputError
from sim.grading import submission_file
from sim.grading.report import SubmissionReport, TestResult, shown_name
from sim.grading.spec import Assignment

MAX_BYTES = 64 * 2**20  # a journal of thousands of submissions is a few MiB; more is not one the grader wrote
MAX_SEED = 2**64 - 1  # as --seed takes it
STATUSES = ("passed", "partial", "failed", "not run", "skipped")
HEAD = ("assignment", "master_sha256", "grader_sha256", "tests", "limits", "ran", "seed")  # the first line's fields
CODE = Path(__file__).resolve().parents[2]  # the folder that holds the sim and gpu packages


class _Bad(Exception):
    """What is wrong with one field of a journal (said in the one-line refusal)."""


def run(assignment: Assignment, limits, ran: bool) -> dict:
    """What a run's grades depend on but its seed: the assignment, its master's bytes, the grader's own code, the
    tests graded (a --self-check's: the public ones), the child's limits (a dataclass), whether the tests could run
    here (False: a GPU assignment where there is none, every test skipped)."""
    return {"assignment": assignment.name, "master_sha256": assignment.sha256, "grader_sha256": grader_digest(),
            "tests": [t["name"] for t in assignment.tests], "limits": asdict(limits), "ran": ran}  # fmt: skip


@cache
def grader_digest() -> str:
    """The sha256 of flashsim's code as it grades: every .py of sim/ and gpu/ and every CUDA source of gpu/, by path
    and bytes (flashsim's version number does not change between releases of the code)."""
    h = hashlib.sha256()
    files = [f for package in ("sim", "gpu") for f in (CODE / package).rglob("*") if f.suffix in (".py", ".cu", ".cuh")]
    for f in sorted(files):
        h.update(f"{f.relative_to(CODE).as_posix()}\0{f.stat().st_size}\0".encode() + f.read_bytes())
    return h.hexdigest()


def kept(path: Path, run: dict, seed: int | None, submissions: list[Path]):
    """`resume`'s reports less those of a submission whose file changed since its line was written (said in one line
    each on stderr), and the journal's seed; a last line cut short is cut off the file, which ends in a whole line."""
    reports, hashes, seed, end = _read(path, run, seed)
    if end is not None:
        _mend(path, end)
    for sub in submissions:
        recorded = hashes.get(sub.name) if sub.name in reports else None
        if recorded is not None and recorded != digest(sub):
            del reports[sub.name]
            print(f"{shown_name(sub.name)} changed since the journal: graded again", file=sys.stderr)
    return reports, seed


def digest(path: Path) -> str:
    """The sha256 of the submission's bytes as the grader reads them; "" for a file it refuses (a pipe, too large)."""
    try:
        return hashlib.sha256(submission_file.read(path)).hexdigest()
    except submission_file.Refused:
        return ""


def resume(path: Path, run: dict, seed: int | None) -> tuple[dict[str, SubmissionReport], int | None]:
    """The reports a journal already holds ({submission: report}) and its seed; nothing if it does not exist. Refused
    in one line where it is not a regular file (a device, a pipe), not a journal the grader wrote (every field is
    checked for its type and range) or one of another `run` (`run`'s dict) or seed."""
    reports, _, seed, _ = _read(path, run, seed)
    return reports, seed


def _read(path: Path, run: dict, seed: int | None):
    """`resume`'s reports, the sha256 each line recorded ({submission: hex}, None for an older line), the seed, and
    where the file's whole lines end if its last one lacks its newline (None if not)."""
    path = Path(path)
    if not os.path.lexists(path):
        return {}, {}, seed, None
    read = read_regular(path, MAX_BYTES, "--journal")
    data, end = _whole_lines(read)
    try:
        lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        if not lines and end is not None:  # its one line, the first, was cut short: nothing was graded
            return {}, {}, seed, _dropped(path, end)
        if not lines:
            raise _Bad("it is empty")
        head, reports, hashes = _head(lines[0]), {}, {}
        for k, entry in enumerate(lines[1:], 2):
            report, sha = _report(entry, head, k)
            reports[report.submission], hashes[report.submission] = report, sha
    except (_Bad, ValueError, RecursionError) as e:
        said = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(e)[:160])  # one line, whatever it holds
        raise InputError(f"--journal: {path} is not a grading journal ({said})") from None
    _same(path, head, run, seed)
    return reports, hashes, head["seed"], end if len(data) == len(read) else _dropped(path, end)


def _whole_lines(data: bytes) -> tuple[bytes, int | None]:
    """`data` less a last line without its newline that is not JSON (the grader was stopped while writing it), and
    where the whole lines end if the last line lacks its newline (None if it has one)."""
    last = data.rpartition(b"\n")[2]
    if not last.strip():
        return data, None
    try:
        json.loads(last)
        return data, len(data)  # whole but for its newline
    except (ValueError, RecursionError):
        return data[: len(data) - len(last)], len(data) - len(last)


def _dropped(path: Path, end: int) -> int:
    """`end`, once stderr has said that the journal's last line was dropped."""
    print(f"--journal: {shown_name(str(path))}: its last line was cut short (the grader was stopped while writing it): "
          "dropped, that submission is graded again", file=sys.stderr)  # fmt: skip
    return end


def _mend(path: Path, end: int) -> None:
    """Cut the journal to its first `end` bytes and end it with a newline: the next line appended starts a line."""
    with open(path, "r+b") as f:
        f.truncate(end)
        if end and os.pread(f.fileno(), 1, end - 1) != b"\n":
            f.seek(end)
            f.write(b"\n")
        f.flush()
        os.fsync(f.fileno())


def _same(path: Path, head: dict, run: dict, seed: int | None) -> None:
    """InputError naming the first of the journal's `head` that differs from this `run` and `seed`."""
    if head["assignment"] != run["assignment"]:
        raise InputError(f"--journal: {path} records assignment {head['assignment']!r}, not {run['assignment']!r}")
    if head["master_sha256"] != run["master_sha256"]:
        raise InputError(f"--journal: {path} was graded with another {run['assignment']} master (sha256 "
                         f"{head['master_sha256'][:12]}…, this one's {run['master_sha256'][:12]}…)")  # fmt: skip
    if head["grader_sha256"] != run["grader_sha256"]:
        raise InputError(f"--journal: {path} was graded by another flashsim's code (sha256 {head['grader_sha256'][:12]}…, "
                         f"this one's {run['grader_sha256'][:12]}…): grade into a new journal")  # fmt: skip
    if head["tests"] != run["tests"]:
        raise InputError(f"--journal: {path} graded {_tests(head['tests'])}, not {_tests(run['tests'])} (a "
                         "--self-check grades the public tests only)")  # fmt: skip
    for key in dict.fromkeys([*run["limits"], *head["limits"]]):
        if head["limits"].get(key) != run["limits"].get(key):
            raise InputError(f"--journal: {path} was graded with the limit {shown_name(key[:40])} = "
                             f"{head['limits'].get(key)}, not {run['limits'].get(key)}")  # fmt: skip
    if head["ran"] != run["ran"]:
        where = "its tests could not run (every test skipped)" if run["ran"] else "its tests ran"
        raise InputError(f"--journal: {path} was written where {where}, not as here")
    if seed is not None and seed != head["seed"]:
        raise InputError(f"--journal: {path} was graded with seed {head['seed']}, not {seed}")


def _tests(names: list[str]) -> str:
    """'3 tests (a, b, c)', the names cut short."""
    listed = shown_name(", ".join(names))
    return f"{len(names)} test{'' if len(names) == 1 else 's'} ({listed if len(listed) <= 60 else listed[:59] + '…'})"


def _head(line) -> dict:
    """The first line: `run`'s fields and the seed (0 … 2⁶⁴ − 1)."""
    if isinstance(line, dict) and set(line) == {"assignment", "seed"}:
        raise _Bad("line 1 records only the assignment and seed (an older flashsim's journal): grade into a new one")
    if isinstance(line, dict) and set(line) == set(HEAD) - {"grader_sha256"}:
        raise _Bad("line 1 does not record the grader's code (an older flashsim's journal): grade into a new one")
    if not isinstance(line, dict) or set(line) != set(HEAD):
        raise _Bad(f"line 1 is {str(line)[:60]}, not {{{', '.join(map(repr, HEAD))}}}")
    _check(line["assignment"], str, "line 1: assignment")
    for key in ("master_sha256", "grader_sha256"):
        if not isinstance(line[key], str) or not re.fullmatch(r"[0-9a-f]{64}", line[key]):
            raise _Bad(f"line 1: {key} {str(line[key])[:70]!r} is not a sha256 in hex")
    for name in _check(line["tests"], list, "line 1: tests"):
        _text(name, "line 1: tests")
    for key, value in _check(line["limits"], dict, "line 1: limits").items():
        _number(value, f"line 1: limits: {key[:40]}")
    if not isinstance(line["ran"], bool):
        raise _Bad(f"line 1: ran is {str(line['ran'])[:40]!r}, not true or false")
    _check(line["seed"], int, "line 1: seed", 0, MAX_SEED)
    return line


def _report(entry, head: dict, k: int) -> tuple[SubmissionReport, str | None]:
    """Line k: one submission's report, of the journal's assignment and seed, and the sha256 it recorded."""
    entry = dict(entry) if isinstance(entry, dict) else entry
    sha = entry.pop("sha256", None) if isinstance(entry, dict) else None
    if sha is not None and (not isinstance(sha, str) or not re.fullmatch(r"([0-9a-f]{64})?", sha)):
        raise _Bad(f"line {k}: sha256 {str(sha)[:70]!r} is not a sha256 in hex")
    entry = dict(_fields(entry, SubmissionReport, f"line {k}", ("submission", "assignment", "seed", "tests")))
    if not _check(entry["submission"], str, f"line {k}: submission") or "/" in entry["submission"]:
        raise _Bad(f"line {k}: submission {entry['submission']!r} is not a file name")
    for name in ("assignment", "seed"):
        if entry[name] != head[name] or type(entry[name]) is not type(head[name]):
            raise _Bad(f"line {k}: {name} {str(entry[name])[:40]!r} is not line 1's {head[name]!r}")
    for name, each in (("flags", _text), ("notes", _text), ("confine_ms", _number)):
        for x in _check(entry.get(name, []), list, f"line {k}: {name}"):
            each(x, f"line {k}: {name}")
    for name in ("printed", "master"):
        _check(entry.get(name, ""), str, f"line {k}: {name}")
    _number(entry.get("seconds", 0.0), f"line {k}: seconds")
    tests = _check(entry["tests"], list, f"line {k}: tests")
    entry["tests"] = [_test(t, f"line {k}: test {j}") for j, t in enumerate(tests)]
    return SubmissionReport(**entry), sha


def _test(t, where: str) -> TestResult:
    """One test's result: its texts, points from 0 to its points, a known visibility and status."""
    t = _fields(t, TestResult, where, ("name", "visibility", "points", "max_points", "status", "feedback"))
    for name in ("name", "feedback", "case", "review"):
        _check(t.get(name, ""), str, f"{where}: {name}")
    if t["visibility"] not in ("public", "hidden") or t["status"] not in STATUSES:
        raise _Bad(f"{where}: visibility {str(t['visibility'])[:20]!r}, status {str(t['status'])[:20]!r} unknown")
    if not 0 <= _number(t["points"], f"{where}: points") <= _number(t["max_points"], f"{where}: max_points"):
        raise _Bad(f"{where}: points {t['points']} is not from 0 to its max_points {t['max_points']}")
    if t.get("hbm_bytes") is not None:
        _check(t["hbm_bytes"], int, f"{where}: hbm_bytes", 0, 2**63 - 1)
    return TestResult(**t)


def _fields(entry, kind, where: str, required: tuple[str, ...]) -> dict:
    """`entry` as a dict holding every required field of `kind` and no field `kind` lacks."""
    if not isinstance(entry, dict):
        raise _Bad(f"{where} is {str(entry)[:60]}, not an object")
    known = {f.name for f in fields(kind)}
    missing, unknown = [f for f in required if f not in entry], sorted(set(entry) - known)
    if missing or unknown:
        raise _Bad(f"{where}: " + (f"no {missing[0]}" if missing else f"a field {unknown[0][:40]!r} it never has"))
    return entry


def _check(value, kind, where: str, low=None, high=None):
    """`value`, if of type `kind` (a bool is no int) and from `low` to `high`."""
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _Bad(f"{where} is {str(value)[:40]!r}, not {'a whole number' if kind is int else kind.__name__}")
    if low is not None and not low <= value <= high:
        raise _Bad(f"{where} is {value}, not from {low} to {high}")
    return value


def _text(value, where: str) -> str:
    return _check(value, str, where)


def _number(value, where: str) -> float:
    """A finite number, 0 or more."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise _Bad(f"{where} is {str(value)[:40]!r}, not a finite number of 0 or more")
    return value


def start(path: Path, run: dict, seed: int) -> None:
    """Begin a journal with `run`'s fields and the seed (kept as it is if it holds a line: that run goes on)."""
    if not os.path.exists(path) or not os.path.getsize(path):
        _append(path, {**run, "seed": seed})


def append(path: Path, report: SubmissionReport, submission: Path | None = None) -> None:
    """Add one graded submission, with the sha256 of its file `submission` where given."""
    _append(path, asdict(report) | ({"sha256": digest(submission)} if submission is not None else {}))


def _append(path: Path, entry: dict) -> None:
    """One JSON line, in ASCII: a file name that is not UTF-8 (lone surrogates, as os.fsdecode reads it) is written
    as its \\u escapes, which json.loads turns back into the same name."""
    with open(path, "a", encoding="ascii") as f:
        f.write(json.dumps(entry, ensure_ascii=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
