"""The CSV of a graded folder: one row per submission, one column per test."""

import csv
import io
import re
from pathlib import Path

from sim.core import atomic_file
from sim.grading.report import SubmissionReport, shown_name

FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula (OWASP's list)
FIRST, LAST = ("submission", "score", "max_score", "hbm_bytes"), ("flags", "review", "notes", "seed")  # its columns
NUMBER = re.compile(r"-?\d+(\.\d+)?(e[+-]?\d+)?")  # the grader's own figures, which a minus sign leaves numbers


def write(reports: list[SubmissionReport], path: Path, order: list[str]) -> None:
    """submission, score, max_score, hbm_bytes, one column of points per test any report holds (in `order`, the
    master's, then any other), flags, notes, seed; written whole (temporary file, then rename), so an interrupted run
    never leaves half a CSV."""
    held = dict.fromkeys(t.name for r in reports for t in r.tests)
    names = sorted(held, key=lambda n: order.index(n) if n in order else len(order))
    f = io.StringIO()
    out = csv.writer(f)
    out.writerow([cell(c) for c in [*FIRST, *names, *LAST]])
    for r in reports:
        points = {t.name: f"{t.points:g}" for t in r.tests}
        row = [shown_name(r.submission), f"{r.score:g}", f"{r.max_score:g}",
               r.hbm_bytes if r.hbm_bytes is not None else "", *(points.get(n, "") for n in names),
               "; ".join(r.flags), "; ".join(r.reviews), "; ".join(r.notes), r.seed]  # fmt: skip
        out.writerow([cell(c) for c in row])
    atomic_file.write_text(path, f.getvalue())


def cell(value) -> str:
    """`value` as a CSV cell a spreadsheet shows as text: one that starts as a formula does (`=`, `+`, `-`, `@`, a tab,
    a carriage return) gets a leading `'` (OWASP's rule for CSV injection); a number stays a number."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA) and not NUMBER.fullmatch(text) else text
