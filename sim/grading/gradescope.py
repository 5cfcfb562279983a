"""Gradescope: the results.json of one graded submission, and the autograder folder that produces it.

results.json follows Gradescope's autograder specification: a score, one entry per test (name,
score, max_score, status "passed"/"failed", output, visibility), and a leaderboard of the HBM
bytes the grader booked (fewer is better, so its order is "asc").
"""

import json
import shlex
import shutil
from pathlib import Path

from sim.core import atomic_file
from sim.grading import spec
from sim.grading.report import SubmissionReport

VISIBILITY = ("visible", "hidden", "after_due_date", "after_published")

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: grade the uploaded .py file(s) with the master beside it.
set -u
cd /autograder/source
/autograder/venv/bin/flashsim grade --gradescope /autograder/results/results.json --hidden-visibility {hidden} -- {master} /autograder/submission
"""

EXTRAS = {"triton": "[assignments-triton]"}  # what a driver needs beyond flashsim itself
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image (Ubuntu 22.04 or newer).
set -eu
apt-get update && apt-get install -y python3 python3-venv python3-pip
PYTHON=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    apt-get install -y python3.11 python3.11-venv  # flashsim needs 3.11; Ubuntu 22.04's python3 is 3.10
    PYTHON=python3.11
fi
"$PYTHON" -m venv /autograder/venv
/autograder/venv/bin/pip install "$(ls /autograder/source/flashsim-*.whl){extra}"
"""


def results(report: SubmissionReport, hidden_visibility: str = "hidden") -> dict:
    """Gradescope's results.json for one submission."""
    tests = [
        {
            "name": t.name,
            "score": round(t.points, 2) if not report.flagged else 0.0,
            "max_score": t.max_points,
            "status": "passed" if t.status == "passed" else "failed",
            "output": t.feedback + (f"\n[{t.case}]" if t.case else ""),
            "visibility": "visible" if t.visibility == "public" else hidden_visibility,
        }
        for t in report.tests
    ]
    # what a flag says after its `what` came from the submission's process: in a hidden test it could be that test's
    # data (red team 104), so the student's output names the guard's fixed words only, the instructor's entry all
    said = dict.fromkeys(f.split(": ", 1)[0] for f in report.flags)
    lines = [*(f"scored 0: the submission {what}" for what in said), *report.notes, f"seed {report.seed}"]
    if report.flags:
        tests.append({"name": "flags, for review", "score": 0.0, "max_score": 0.0, "status": "failed",
                      "output": "\n".join(report.flags), "visibility": hidden_visibility})  # fmt: skip
    out = {"score": round(report.score, 2), "execution_time": round(report.seconds, 2), "output": "\n".join(lines),
           "tests": tests}  # fmt: skip
    if report.public_hbm_bytes is not None and not report.flagged:
        out["leaderboard"] = [{"name": "HBM bytes", "value": report.public_hbm_bytes, "order": "asc"}]
    return out


def write(report: SubmissionReport, path: Path, hidden_visibility: str = "hidden") -> None:
    """Write results.json whole (temporary file, then rename; its folder must exist: Gradescope makes it)."""
    atomic_file.write_text(Path(path), json.dumps(results(report, hidden_visibility), indent=2, ensure_ascii=False))


def write_autograder(folder: Path, master: Path, hidden: str = "hidden") -> None:
    """The autograder zip's contents: setup.sh, run_autograder and the master (add a flashsim wheel, then zip). The
    master's name is quoted for the shell, after `--` (a name may hold a space, a quote, or start with `-`), and
    written as the bytes it is on disk (a name that is not UTF-8 comes back as them: surrogateescape)."""
    folder.mkdir(exist_ok=True)
    shutil.copyfile(master, folder / master.name)
    for name, text in (
        ("setup.sh", SETUP_SH.format(extra=EXTRAS.get(spec.load(master).grading["driver"], ""))),
        ("run_autograder", RUN_AUTOGRADER.format(master=shlex.quote(master.name), hidden=shlex.quote(hidden))),
    ):
        (folder / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        (folder / name).chmod(0o755)
