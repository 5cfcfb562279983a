"""A grading run's journal: one JSON line per graded submission, so an interrupted batch resumes where it stopped.

The first line names the assignment and the run's seed; each later line is one submission's report,
appended and flushed to disk as soon as it is graded. Started again with the same journal, the
grader keeps those reports, grades only the submissions without one, on the same seed's cases.
"""

import json
import os
from dataclasses import asdict
from pathlib import Path

from sim.core.errors import InputError
from sim.grading.report import SubmissionReport, TestResult


def resume(path: Path, assignment: str, seed: int | None) -> tuple[dict[str, SubmissionReport], int | None]:
    """The reports a journal already holds ({submission: report}) and its seed; nothing if it does not exist."""
    path = Path(path)
    if not path.exists():
        return {}, seed
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        head, reports = lines[0], {}
        for entry in lines[1:]:
            tests = [TestResult(**t) for t in entry.pop("tests")]
            reports[entry["submission"]] = SubmissionReport(**entry, tests=tests)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise InputError(f"--journal: {path} is not a grading journal ({str(e)[:100]})") from None
    if head.get("assignment") != assignment:
        raise InputError(f"--journal: {path} records assignment {head.get('assignment')!r}, not {assignment!r}")
    if seed is not None and seed != head.get("seed"):
        raise InputError(f"--journal: {path} was graded with seed {head.get('seed')}, not {seed}")
    return reports, head["seed"]


def start(path: Path, assignment: str, seed: int) -> None:
    """Begin a journal (kept as it is if it exists: that run goes on)."""
    if not Path(path).exists():
        _append(path, {"assignment": assignment, "seed": seed})


def append(path: Path, report: SubmissionReport) -> None:
    """Add one graded submission."""
    _append(path, asdict(report))


def _append(path: Path, entry: dict) -> None:
    """One JSON line, in ASCII: a file name that is not UTF-8 (lone surrogates, as os.fsdecode reads it) is written
    as its \\u escapes, which json.loads turns back into the same name."""
    with open(path, "a", encoding="ascii") as f:
        f.write(json.dumps(entry, ensure_ascii=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
