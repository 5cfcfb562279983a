"""The grading journal holds any file name a submission can have: a name that is not UTF-8 (Python reads it with
lone surrogates, os.fsdecode) once stopped the grader with a UnicodeEncodeError at the journal's write."""

import json
import os
import shutil
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import app
from sim.grading import journal
from sim.grading import report as reports

TINY = Path(__file__).parent / "grading_submissions" / "tiny" / "01_tiny_softmax.py"
NAME_BYTES = st.binary(min_size=1, max_size=24).filter(lambda b: b"/" not in b and b"\0" not in b)


@settings(max_examples=200, deadline=None)
@given(name=NAME_BYTES)
def test_a_journal_gives_back_every_file_name_it_was_given(tmp_path_factory, name):
    """Whatever bytes a file name holds, the journal writes its report and resume finds it under the same name."""
    path = tmp_path_factory.mktemp("journal") / "journal.jsonl"
    submission = os.fsdecode(name + b".py")  # as Path.iterdir names it
    report = reports.SubmissionReport(
        submission, "01_tiny", 3, tests=[reports.TestResult("t", "public", 1.0, 1.0, "passed", "ok")]
    )
    journal.start(path, "01_tiny", 3)
    journal.append(path, report)
    done, seed = journal.resume(path, "01_tiny", None)
    assert seed == 3 and list(done) == [submission] and done[submission] == report


def test_grade_with_a_journal_takes_a_submission_whose_name_is_not_utf8(tmp_path):
    """`flashsim grade --journal` of a folder holding `caf\\xe9.py` (Latin-1): both graded, the journal resumes both."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copy(TINY, folder / "alice.py")
    shutil.copy(TINY, os.fsencode(folder) + b"/caf\xe9.py")
    args = ["grade", TINY, folder, "--seed", 2, "--journal", tmp_path / "journal.jsonl", "--csv", tmp_path / "g.csv"]
    for _ in range(2):  # the second run resumes from the journal
        out = CliRunner().invoke(app, [str(a) for a in args])
        assert out.exit_code == 0, out.output
        assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    done, _ = journal.resume(tmp_path / "journal.jsonl", "01_tiny_softmax", None)
    assert sorted(done) == ["alice.py", os.fsdecode(b"caf\xe9.py")]
    assert all(r.score == 2 for r in done.values())


def test_a_resumed_journal_grades_again_a_file_that_changed_and_keeps_the_others(tmp_path):
    """Red team 72: a --journal run resumed kept the old grade of a file whose content had changed since."""
    folder, record = tmp_path / "submissions", tmp_path / "journal.jsonl"
    folder.mkdir()
    for name in ("a.py", "b.py"):
        shutil.copy(TINY, folder / name)
    args = [
        str(a)
        for a in ("grade", TINY, folder, "--seed", 2, "--jobs", 1, "--journal", record, "--csv", tmp_path / "g.csv")
    ]
    assert CliRunner().invoke(app, args).exit_code == 0
    (folder / "b.py").write_text(TINY.read_text() + "# edited\n")
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "b.py changed since the journal: graded again" in out.stderr, out.stderr
    assert "a.py changed" not in out.stderr, out.stderr
    done, _ = journal.resume(record, "01_tiny_softmax", None)
    assert done["a.py"].score == 2 and done["b.py"].score == 2
    lines = record.read_text().splitlines()
    assert [json.loads(x)["submission"] for x in lines[1:]] == ["a.py", "b.py", "b.py"]  # b graded again, a kept


def test_a_journal_line_without_a_hash_is_kept_as_before(tmp_path):
    record, sub = tmp_path / "journal.jsonl", tmp_path / "a.py"
    sub.write_text("x = 1\n")
    journal.start(record, "01_tiny", 3)
    journal.append(record, reports.SubmissionReport("a.py", "01_tiny", 3))  # no file given: no sha256, as before
    sub.write_text("x = 2\n")
    assert list(journal.kept(record, "01_tiny", None, [sub])[0]) == ["a.py"]
