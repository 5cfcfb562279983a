"""`flashsim bench grade`: how long grading a class takes — N submissions of assignment 2, right and wrong.

The submissions are made from the master: its solution (half of them), the solution made to re-read
K and V for every Q block (IO-wasteful), the solution without the rescale of O_i (wrong numbers), and
the student's stub. They are written to a temporary folder and graded as `flashsim grade` does.
"""

import os
import tempfile
import time
from pathlib import Path

from sim.core.errors import InputError
from sim.grading import export, grader, spec, submission_file
from sim.lab import course
from sim.lab.bench import machine

ASSIGNMENT = "02"
MUTATIONS = {  # kind → (text in the master's solution, what replaces it)
    "rereads K, V": ('            Q_i = chip.load("Q_i", "Q", rows)',
                     '            K_j, V_j = chip.load("K_j", "K", cols), chip.load("V_j", "V", cols)\n'
                     '            Q_i = chip.load("Q_i", "Q", rows)'),
    "no rescale": ("((ℓ_i * α)[:, None] * O_i", "(ℓ_i[:, None] * O_i"),
}  # fmt: skip
MIX = ["right"] * 5 + ["rereads K, V"] * 2 + ["no rescale"] * 2 + ["stub"]  # every 10 submissions


def submissions(folder: Path, n: int) -> dict[str, int]:
    """Write n submissions of assignment 2 into `folder`; returns how many of each kind."""
    master = course.needs_master(spec.locate(ASSIGNMENT), "bench grade", "it").read_text(encoding="utf-8")
    texts = {"right": master, "stub": export.student_text(master)}
    for kind, (old, new) in MUTATIONS.items():
        if old not in master:
            raise InputError(f"bench grade: the master of assignment {ASSIGNMENT} no longer holds {old.strip()!r}")
        texts[kind] = master.replace(old, new)
    made: dict[str, int] = {}
    for i in range(n):
        kind = MIX[i % len(MIX)]
        (folder / f"student_{i:03d}.py").write_text(texts[kind], encoding="utf-8")
        made[kind] = made.get(kind, 0) + 1
    return made


def bench_grade(n: int = 100, jobs: int | None = None, seed: int = 0, progress=None) -> dict:
    """Grade n generated submissions of assignment 2, confined as `flashsim grade` confines them; the wall time, per
    submission and in all, and what confining each child cost. `progress(report)` is called as each is graded."""
    assignment = spec.load(spec.locate(ASSIGNMENT))
    load = os.getloadavg()[0]  # the machine may be shared: what else was running when the clock started
    with tempfile.TemporaryDirectory(prefix="flashsim-bench-grade-") as tmp:
        made = submissions(Path(tmp), n)
        start = time.perf_counter()
        found = submission_file.submissions_in(Path(tmp))
        walls = grader.isolate(assignment, found)
        reports = grader.grade(assignment, found, seed=seed, jobs=jobs, progress=progress, walls=walls)
        total = time.perf_counter() - start
    confine = sorted(ms for r in reports for ms in r.confine_ms)
    per = sorted(r.seconds for r in reports)
    scores: dict[str, list[float]] = {}
    for i, r in enumerate(reports):
        scores.setdefault(MIX[i % len(MIX)], []).append(r.score)
    return {
        "benchmark": "grade",
        "machine": machine(),
        "assignment": assignment.name,
        "submissions": n,
        "jobs": jobs,
        "tests_per_submission": len(assignment.tests),
        "seconds": total,
        "per_submission_seconds": {"median": per[len(per) // 2], "max": per[-1]},
        "isolation": walls.line(),
        "confinement_ms": {"children": len(confine), "median": confine[len(confine) // 2], "max": confine[-1]},
        "load_average": {"start": load, "end": os.getloadavg()[0]},
        "kinds": {kind: {"count": made[kind], "scores": sorted(set(s))} for kind, s in scores.items()},
    }
