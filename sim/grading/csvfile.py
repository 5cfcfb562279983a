"""The CSV of a graded folder: one row per submission, one column per test."""

import csv
from pathlib import Path

from sim.grading.report import SubmissionReport


def write(reports: list[SubmissionReport], path: Path) -> None:
    """submission, score, max_score, hbm_bytes, one column of points per test, flags, seed."""
    names = [t.name for t in reports[0].tests] if reports else []
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["submission", "score", "max_score", "hbm_bytes", *names, "flags", "seed"])
        for r in reports:
            points = {t.name: f"{t.points:g}" for t in r.tests}
            out.writerow([r.submission, f"{r.score:g}", f"{r.max_score:g}", r.hbm_bytes if r.hbm_bytes is not None else "",
                          *(points.get(n, "") for n in names), "; ".join(r.flags), r.seed])  # fmt: skip
