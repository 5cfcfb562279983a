"""The grading journal holds any file name a submission can have: a name that is not UTF-8 (Python reads it with
lone surrogates, os.fsdecode) once stopped the grader with a UnicodeEncodeError at the journal's write."""

import csv
import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import app
from sim.core.errors import InputError
from sim.grading import csvfile, journal, sandbox, spec
from sim.grading import report as reports
from tests.cli_runner import error_line, flashsim

TINY = Path(__file__).parent / "grading_submissions" / "tiny" / "01_tiny_softmax.py"
ROOT = Path(__file__).resolve().parents[1]
RUN = journal.run(spec.load(TINY), sandbox.Limits(), ran=True)
NAME_BYTES = st.binary(min_size=1, max_size=24).filter(lambda b: b"/" not in b and b"\0" not in b)


@settings(max_examples=200, deadline=None)
@given(name=NAME_BYTES)
def test_a_journal_gives_back_every_file_name_it_was_given(tmp_path_factory, name):
    """Whatever bytes a file name holds, the journal writes its report and resume finds it under the same name."""
    path = tmp_path_factory.mktemp("journal") / "journal.jsonl"
    submission = os.fsdecode(name + b".py")  # as Path.iterdir names it
    report = reports.SubmissionReport(
        submission, "01_tiny_softmax", 3, tests=[reports.TestResult("t", "public", 1.0, 1.0, "passed", "ok")]
    )
    journal.start(path, RUN, 3)
    journal.append(path, report)
    done, seed = journal.resume(path, RUN, None)
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
    done, _ = journal.resume(tmp_path / "journal.jsonl", RUN, None)
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
    done, _ = journal.resume(record, RUN, None)
    assert done["a.py"].score == 2 and done["b.py"].score == 2
    lines = record.read_text().splitlines()
    assert [json.loads(x)["submission"] for x in lines[1:]] == ["a.py", "b.py", "b.py"]  # b graded again, a kept


def test_a_journal_line_without_a_hash_is_kept_as_before(tmp_path):
    record, sub = tmp_path / "journal.jsonl", tmp_path / "a.py"
    sub.write_text("x = 1\n")
    journal.start(record, RUN, 3)
    journal.append(record, reports.SubmissionReport("a.py", "01_tiny_softmax", 3))  # no file: no sha256, as before
    sub.write_text("x = 2\n")
    assert list(journal.kept(record, RUN, None, [sub])[0]) == ["a.py"]


def graded(record: Path, *args, code=0):
    """`flashsim grade ARGS --seed 2 --jobs 1 --journal record`."""
    return flashsim("grade", *args, "--seed", 2, "--jobs", 1, "--journal", record, code=code)


def test_a_journal_of_another_run_is_refused_naming_what_differs(tmp_path):
    """Red team W1: a --self-check's journal (the public tests only) resumed by a real run kept its reports, full
    marks of the public tests; the head records what the grades depend on, and a run that differs is refused."""
    mine, record = tmp_path / "mine" / TINY.name, tmp_path / "journal.jsonl"
    mine.parent.mkdir()
    shutil.copy(TINY, mine)
    graded(record, "--self-check", mine)
    assert error_line(graded(record, TINY, mine, code=2)) == (
        f"error: --journal: {record} graded 1 test (update, a few logits), not 2 tests (update, a few logits, update, "
        "masked logits) (a --self-check grades the public tests only)"
    )
    record.unlink()
    graded(record, TINY, mine)
    mine.write_text(TINY.read_text() + "# edited\n")  # another master of the same name
    old, new = (hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in (TINY, mine))
    assert error_line(graded(record, mine, TINY, code=2)) == (
        f"error: --journal: {record} was graded with another 01_tiny_softmax master (sha256 {old}…, this one's {new}…)"
    )
    line = error_line(graded(record, TINY, mine, "--timeout", 5, code=2))
    assert line == f"error: --journal: {record} was graded with the limit wall_s = 10.0, not 5.0"
    with pytest.raises(InputError, match="was written where its tests ran, not as here"):
        journal.resume(record, RUN | {"ran": False}, None)  # a GPU assignment resumed where there is no GPU
    assert list(journal.resume(record, RUN, None)[0]) == [TINY.name]


def test_a_journal_written_by_other_grader_code_is_refused(tmp_path, monkeypatch):
    """The journal's head did not record the grader's code: flashsim's version (0.1.0) stays the same while its
    code changes, so a batch resumed after an upgrade mixed two graders' grades."""
    record, code = tmp_path / "j.jsonl", tmp_path / "code"
    graded(record, TINY, TINY)
    head = json.loads(record.read_text().splitlines()[0])
    files = sorted(f for p in ("sim", "gpu") for f in (ROOT / p).rglob("*") if f.suffix in (".py", ".cu", ".cuh"))
    whole = hashlib.sha256()
    for f in files:  # the digest's definition: path, size, bytes of every file
        whole.update(f"{f.relative_to(ROOT).as_posix()}\0{f.stat().st_size}\0".encode() + f.read_bytes())
    assert head["grader_sha256"] == whole.hexdigest()
    for package in ("sim", "gpu"):  # the same code elsewhere has the same digest; one byte more, another
        shutil.copytree(ROOT / package, code / package, ignore=lambda d, names: [
            n for n in names if n == "__pycache__" or ((Path(d) / n).is_file() and Path(n).suffix not in (".py", ".cu", ".cuh"))
        ])  # fmt: skip
    monkeypatch.setattr(journal, "CODE", code)
    journal.grader_digest.cache_clear()
    assert journal.grader_digest() == head["grader_sha256"]
    with open(code / "sim" / "grading" / "checks.py", "a") as f:
        f.write("\n")
    journal.grader_digest.cache_clear()
    other = journal.grader_digest()
    journal.grader_digest.cache_clear()
    with pytest.raises(InputError) as refused:
        journal.resume(record, RUN | {"grader_sha256": other}, None)
    assert str(refused.value) == (
        f"--journal: {record} was graded by another flashsim's code (sha256 {head['grader_sha256'][:12]}…, this "
        f"one's {other[:12]}…): grade into a new journal"
    )


def test_the_csv_has_a_column_for_every_test_any_report_holds_in_the_masters_order(tmp_path):
    """Red team W1: the CSV's columns were reports[0]'s tests: a test only later reports held had no column."""

    def report(name: str, *tests: str) -> reports.SubmissionReport:
        results = [reports.TestResult(t, "public", 1.0, 2.0, "partial", "") for t in tests]
        return reports.SubmissionReport(name, "x", 1, tests=results)

    csvfile.write([report("a.py", "b"), report("b.py", "c", "a")], tmp_path / "g.csv", ["a", "b", "c"])
    rows = list(csv.reader(open(tmp_path / "g.csv", encoding="utf-8")))
    assert rows[0][4:7] == ["a", "b", "c"] and rows[1][4:7] == ["", "1", ""] and rows[2][4:7] == ["1", "", "1"]


def test_a_journal_cut_short_in_its_last_line_resumes_and_grades_that_submission_again(tmp_path):
    """Red team C4: a journal whose last line the grader was stopped while writing was refused whole."""
    folder, record = tmp_path / "submissions", tmp_path / "journal.jsonl"
    folder.mkdir()
    for name in ("a.py", "b.py"):
        shutil.copy(TINY, folder / name)
    graded(record, TINY, folder)
    whole = record.read_bytes()
    record.write_bytes(whole[: whole.rindex(b'"submission"')])  # b's line cut short, without its newline
    out = graded(record, TINY, folder)
    assert f"--journal: {record}: its last line was cut short" in out.stderr, out.stderr
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert [x.get("submission") for x in lines] == [None, "a.py", "b.py"]  # b's line dropped, b graded again
    assert sorted(journal.resume(record, RUN, None)[0]) == ["a.py", "b.py"]


@pytest.mark.parametrize("text", ['{"cut\n', '{"cut\nREPORT\n', "REPORT\nREPORT\n{}\n"])
def test_a_malformed_line_with_its_newline_or_before_the_last_is_still_refused(tmp_path, text):
    line = json.dumps(dataclasses.asdict(reports.SubmissionReport("a.py", "01_tiny_softmax", 3)))
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps(RUN | {"seed": 3}) + "\n" + text.replace("REPORT", line))
    with pytest.raises(InputError, match="is not a grading journal"):
        journal.resume(path, RUN, None)


@settings(max_examples=300, deadline=None)
@given(extra=st.integers(0, 2), data=st.data())
def test_a_journal_cut_anywhere_keeps_its_whole_lines_and_goes_on(tmp_path_factory, extra, data):
    """Stopped at any byte: every line written whole (its newline or not) is kept, a line cut short is dropped, and
    the grader appends after the kept lines: the next resume finds them and the new one."""
    path = tmp_path_factory.mktemp("journal") / "journal.jsonl"
    journal.start(path, RUN, 3)
    for k in range(2 + extra):
        journal.append(path, reports.SubmissionReport(f"{k}.py", "01_tiny_softmax", 3))
    written = path.read_bytes()
    cut = data.draw(st.integers(1, len(written)))
    path.write_bytes(written[:cut])
    pieces = zip(written[:cut].split(b"\n"), written.split(b"\n"), strict=False)
    whole = [json.loads(piece)["submission"] for piece, line in list(pieces)[1:] if piece == line and piece]
    assert list(journal.kept(path, RUN, None, [])[0]) == whole
    journal.start(path, RUN, 3)  # where the head was cut short the file is empty now: begun again
    journal.append(path, reports.SubmissionReport("new.py", "01_tiny_softmax", 3))
    assert list(journal.resume(path, RUN, None)[0]) == [*whole, "new.py"]
