"""Assignment 6 (the sliding-window forward), graded end to end: the master scores full marks, the stub zero, and a
pass that loads the blocks outside the window loses the IO marks."""

from pathlib import Path

from sim.grading import export, grader, spec


def grade_one(assignment, path, seed=11):
    (report,) = grader.grade(assignment, [Path(path)], seed=seed, jobs=1)
    return report


def test_the_master_scores_full_marks():
    assignment = spec.load(spec.locate("06"))
    for seed in (11, 12):
        report = grade_one(assignment, assignment.path, seed)
        assert [t.status for t in report.tests] == ["passed"] * len(assignment.tests), [
            t.feedback for t in report.tests
        ]
        assert report.score == report.max_score == assignment.points == 100
        assert not report.flags


def test_the_exported_stub_scores_zero(tmp_path):
    master = spec.locate("06")
    report = grade_one(spec.load(master), export.export(master, student=tmp_path))
    assert report.score == 0 and all(t.feedback.startswith("not implemented yet: ") for t in report.tests)


def test_a_pass_that_loads_every_block_loses_the_io_marks(tmp_path):
    master = spec.locate("06")
    text = master.read_text()
    old = "                continue  # no row of Q_i sees this block: never loaded"
    assert old in text
    path = tmp_path / "every_block.py"
    path.write_text(text.replace(old, "                pass  # loads it anyway (and masks all of it)"))
    report = grade_one(spec.load(master), path)
    by_name = {t.name: t for t in report.tests}
    for name in ("window (8, 0), N = Nk", "two-sided window, fp16"):
        assert by_name[name].status == "passed", by_name[name].feedback  # right numbers
    io = by_name["IO, window (16, 0)"]
    assert io.points == 0.0 and io.feedback.startswith("correct, but "), io.feedback
    assert "where FlashAttention-2 skipping the blocks outside its window reads them" in io.feedback
    assert report.score < 100
