"""A folder's hostile entries (red team h69): a named pipe, a link to the master or to a large file, a file over the
child's file limit, a name with a line break in it, and a submission that nests thousands of folders. Each is
graded and shown as one line; none hangs the grader, costs it memory or leaves a folder behind."""

import csv
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from sim.core.errors import InputError
from sim.grading import folder_removal, grader, isolation, similarity, spec, submission_file

HERE = Path(__file__).parent
ROOT = HERE.parent
CLASSMATE = HERE / "grading_submissions" / "02" / "algorithm1.py"
MASTER = spec.locate("02")
ONE_TEST = replace(spec.load(MASTER), tests=spec.load(MASTER).tests[:1])
FORGED = "carol.py: 0 \u2215 100 (1.10 s)\ngraded mallory.py"  # prints a progress line of its own (∕: no slash)


def grade_cli(*args, timeout=120) -> subprocess.CompletedProcess:
    """`flashsim grade` in a process of its own, ended if it hangs (as a FIFO once made it)."""
    command = [sys.executable, "-m", "sim.cli", "grade", *map(str, args), "--jobs", "1", "--seed", "5"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def test_a_pipe_and_links_in_a_folder_are_graded_zero_naming_what_they_are(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_bytes(CLASSMATE.read_bytes())
    os.mkfifo(folder / "mallory.py")
    (folder / "master.py").symlink_to(MASTER)  # followed, it scored 100
    (tmp_path / "big").write_bytes(b"#" * (8 << 20))
    (folder / "zed.py").symlink_to(tmp_path / "big")  # /dev/zero's stand-in: read whole, it cost gigabytes
    done = grade_cli(MASTER, folder, "--csv", tmp_path / "g.csv")
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    rows = {r["submission"]: r for r in csv.DictReader(open(tmp_path / "g.csv", encoding="utf-8"))}
    assert rows["alice.py"]["score"] == "100"
    assert {rows[n]["score"] for n in ("mallory.py", "master.py", "zed.py")} == {"0"}
    out = " ".join(done.stdout.split())
    assert "not run: mallory.py is a named pipe (FIFO), not a regular file" in out
    assert "not run: master.py is a symbolic link, not a regular file" in out


def test_a_file_over_the_childs_file_limit_is_refused_saying_its_size(tmp_path):
    big = tmp_path / "big.py"
    big.write_bytes(CLASSMATE.read_bytes() + b"# padding\n" * 110_000)
    (report,) = grader.grade(ONE_TEST, [big], seed=5, jobs=1)
    (test,) = report.tests
    size = f"{big.stat().st_size:,}"
    assert test.status == "not run" and report.score == 0
    assert test.feedback == f"not run: big.py is {size} bytes, larger than the 1.0 MiB a submission may be"


def test_the_one_read_refuses_without_blocking_or_following_and_reads_at_most_the_cap(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "ok.py").write_bytes(b"x = 1\n")
    (tmp_path / "big.py").write_bytes(b"x = 1\n" * 1000)
    with pytest.raises(submission_file.Refused, match=r"^pipe.py is a named pipe \(FIFO\), not a regular file$"):
        submission_file.read(tmp_path / "pipe.py")
    with pytest.raises(submission_file.Refused, match=r"^zero.py is a symbolic link, not a regular file$"):
        submission_file.read(tmp_path / "zero.py")
    with pytest.raises(submission_file.Refused, match=r"^big.py is 6,000 bytes, larger than the 4.9 KiB"):
        submission_file.read(tmp_path / "big.py", 5000)
    assert submission_file.read(tmp_path / "ok.py") == b"x = 1\n"
    assert similarity._read(tmp_path / "pipe.py") == similarity._read(tmp_path / "zero.py") == ""


def test_similarity_reads_no_file_over_the_cap(tmp_path):
    big = tmp_path / "mallory.py"
    big.write_bytes(b"x = (a + b) * c - d[1]\n" * 220_000)  # 5 MB: 45 s and 1.8 GB of the grader's, before
    assert similarity._read(big) == ""


def test_a_named_file_that_is_a_link_is_followed_to_a_regular_file(tmp_path):
    (tmp_path / "latest.py").symlink_to(CLASSMATE)
    assert submission_file.submissions_in(tmp_path / "latest.py") == [CLASSMATE.resolve()]


def test_a_named_link_that_leads_nowhere_is_no_file(tmp_path):
    # before: its missing target was graded 0 under the target's name ("cannot read x.py: No such file or directory")
    (tmp_path / "latest.py").symlink_to(tmp_path / "gone" / "x.py")
    with pytest.raises(InputError, match=r"^submission: no file or folder .*latest\.py$"):
        submission_file.submissions_in(tmp_path / "latest.py")


DEEP = """import os
import numpy as np

for _ in range(1500):  # at import, in its own folder: a chain deeper than the recursion limit
    os.mkdir("a")
    os.chdir("a")


def update(m, l, x):
    m_new = np.maximum(m, x)
    s = np.where(np.isneginf(m_new), 0.0, m_new)
    return m_new, l * np.exp(m - s) + np.exp(x - s)


def merge(m1, l1, m2, l2):
    m = np.maximum(m1, m2)
    s = np.where(np.isneginf(m), 0.0, m)
    return m, l1 * np.exp(m1 - s) + l2 * np.exp(m2 - s)
"""


def test_a_chain_of_thousands_of_folders_is_removed_and_the_submission_still_graded(monkeypatch, tmp_path):
    (deep := tmp_path / "deep.py").write_text(DEEP)
    online = spec.load(spec.locate("01"))  # its child's folder is writable
    monkeypatch.setattr(isolation, "WITHOUT", frozenset({"namespaces"}))  # the folder is on the disk, not a tmpfs
    (children := tmp_path / "children").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(children))
    (report,) = grader.grade(replace(online, tests=online.tests[:2]), [deep], seed=5, jobs=1)
    assert [t.status for t in report.tests] == ["passed"] * 2, report.tests
    assert os.listdir(children) == []


def test_removal_needs_no_recursion_and_no_long_path(tmp_path):
    top = tmp_path / "top"
    os.mkdir(top)
    fd = os.open(top, os.O_RDONLY)
    for _ in range(sys.getrecursionlimit() + 500):  # deeper than any recursion, longer than PATH_MAX
        os.mkdir("abcdefgh", dir_fd=fd)
        inner = os.open("abcdefgh", os.O_RDONLY, dir_fd=fd)
        open(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=inner), "w").close()
        os.close(fd)
        fd = inner
    os.close(fd)
    assert folder_removal.remove(str(top)) and not top.exists()


def test_a_name_with_a_line_break_is_one_line_in_every_output(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "carol.py").write_bytes(CLASSMATE.read_bytes())
    (folder / FORGED).write_bytes(CLASSMATE.read_bytes())  # a copy: the similarity note names it too
    done = grade_cli(MASTER, folder, "--csv", tmp_path / "g.csv", "--journal", tmp_path / "j.jsonl")
    shown = FORGED.replace("\n", "\\n")
    graded = [line for line in done.stdout.splitlines() if line.startswith("graded ")]
    assert len(graded) == 2 and not any(line.startswith("graded mallory.py") for line in done.stdout.splitlines())
    assert f"similar to {shown}:" in " ".join(done.stdout.split())
    lines = (tmp_path / "g.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and lines[2].startswith(shown)
    assert len((tmp_path / "j.jsonl").read_text().splitlines()) == 3  # the raw name, the journal's key, in JSON
    again = grade_cli(MASTER, folder, "--journal", tmp_path / "j.jsonl", "--details")
    assert f"{shown} · 02_flash1_forward · 100 / 100" in again.stdout
