"""The CSV of a graded folder: one row per submission, one column per test."""

import csv
import io
from pathlib import Path

from sim.core import atomic_file
from sim.grading.report import SubmissionReport, printable


def write(reports: list[SubmissionReport], path: Path) -> None:
    """submission, score, max_score, hbm_bytes, one column of points per test, flags, notes, seed; written whole
    (temporary file, then rename), so an interrupted run never leaves half a CSV."""
    names = [t.name for t in reports[0].tests] if reports else []
    f = io.StringIO()
    out = csv.writer(f)
    out.writerow(["submission", "score", "max_score", "hbm_bytes", *names, "flags", "review", "notes", "seed"])
    for r in reports:
        points = {t.name: f"{t.points:g}" for t in r.tests}
        out.writerow([printable(r.submission), f"{r.score:g}", f"{r.max_score:g}", r.hbm_bytes if r.hbm_bytes is not None else "",
                      *(points.get(n, "") for n in names), "; ".join(r.flags), "; ".join(r.reviews),
                      "; ".join(r.notes), r.seed])  # fmt: skip
    atomic_file.write_text(path, f.getvalue())
