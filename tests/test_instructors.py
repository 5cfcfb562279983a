"""The instructor's guide: every assignment mapped, every lesson's "Try it" answered, the numbers it quotes
recomputed, and no handout sending students to the library's listings."""

import re
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat", reason="the lessons' tests need the dev extra (nbformat, nbclient)")

import sim
from sim.grading import spec
from sim.lab import sweep, walkthrough
from sim.machine import hardware

LESSONS = Path(__file__).parent.parent / "lessons"
GUIDE = (LESSONS / "INSTRUCTORS.md").read_text()


def test_every_assignment_is_in_the_map():
    for master in spec.masters():
        assert f"`{master.stem}`" in GUIDE, master.name


def test_every_try_it_has_an_answer():
    for lesson in sorted(LESSONS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(lesson, as_version=4)
        prompts = sum(len(re.findall(r"Try it", c.source)) for c in nb.cells if c.cell_type == "markdown")
        answers = len(re.findall(rf"^\*\*Lesson {int(lesson.name[:2])}, ", GUIDE, re.M))
        assert answers == prompts, f"{lesson.name}: {prompts} Try it, {answers} answers in INSTRUCTORS.md"


def test_no_handout_sends_students_to_the_listings():
    for master in spec.masters():
        statement = spec.load(master).statement
        assert "sim/algorithms/" not in statement, f"{master.name} points students at the library's answer"


def test_the_numbers_the_answers_quote():
    a100, h100, h200 = (hardware.get(n) for n in ("A100-40GB", "H100-SXM", "H200"))
    ridge = {dt: a100.peak(dt) / a100.hbm_bandwidth for dt in ("fp16", "fp32")}
    assert (
        round(ridge["fp16"]) == 201
        and round(ridge["fp32"], 1) == 12.5
        and round(h100.peak("fp16") / h100.hbm_bandwidth) == 295
    )
    smallest = {dt: int(1.5 * s * a100.peak(dt) / a100.hbm_bandwidth) + 1 for dt, s in (("fp16", 2), ("fp32", 4))}
    assert smallest == {"fp16": 602, "fp32": 76}  # 2n³/peak > 3sn²/bandwidth ⇔ n > 1.5·s·ridge
    assert [sweep.largest_fitting_n(64, 2, 256, hw.hbm_bytes) for hw in (a100, h200)] == [6186, 11670]
    k2 = walkthrough.K.copy()
    k2[3] = [0, 4, 0, 0]
    for K, rows in ((walkthrough.K, 2), (k2, 2), (walkthrough.K, 1)):
        r = sim.run("flash1", walkthrough.Q, K, walkthrough.V, block_rows=rows, block_cols=2, hardware="toy")
        assert r.hbm_bytes == 736
    r = sim.run("flash1", walkthrough.Q, k2, walkthrough.V, block_rows=2, block_cols=2, hardware="toy", record="values")
    α = {(s.i, s.j): s.values["after"]["α_i"] for s in r.trace.steps if s.line == 11}
    assert np.allclose(α[0, 1], [np.exp(-1), np.exp(-3)], atol=5e-4) and np.isclose(α[1, 1][0], 0.223, atol=5e-4)
    ratios = []
    for hw in ("A100-40GB", "H100-SXM"):
        f, b = sim.count("flash2", n=1024, d=64, hardware=hw), sim.count_backward("flash2", n=1024, d=64, hardware=hw)
        sf, sb = (
            sim.count("standard", n=1024, d=64, hardware=hw),
            sim.count_backward("standard", n=1024, d=64, hardware=hw),
        )
        ratios.append(round((sf.hbm_bytes + sb.hbm_bytes) / (f.hbm_bytes + b.hbm_bytes), 2))
    assert ratios == [2.09, 3.27]


def test_every_lesson_has_a_row_in_the_map():
    table = GUIDE.split("## 1 ·")[1].split("\n\n")[1]  # section 1's table
    rows = [row for row in table.splitlines()[2:] if row.startswith("|")]
    named = {int(n) for row in rows for n in re.findall(r"(?<!-)\b\d+\b", row.split("|")[1])}  # not FlashAttention-2
    assert named == set(range(1, len(sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))) + 1)), sorted(named)


def test_no_placeholder_is_left():
    assert not re.findall(r"<!--|goes here|arrive from other branches|adds their rows", GUIDE)
