"""A grading run stopped by SIGTERM or SIGINT half-way: its children killed, their folders removed, its journal
whole; started again with the journal, it grades only the submissions it had not finished."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.core.errors import InputError
from sim.grading import grader, spec
from tests.pty_terminal import foreground

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "grading_submissions" / "tiny" / "01_tiny_softmax.py"
N = 6


def grade(tmp: Path, folder: Path, journal: Path, csv: Path) -> subprocess.Popen:
    """`flashsim grade` of the folder, one submission at a time, children's folders made in `tmp`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    args = ["grade", str(TINY), str(folder), "--seed", "5", "--jobs", "1", "--journal", str(journal), "--csv", str(csv)]
    return subprocess.Popen([sys.executable, "-m", "sim.cli", *args, "--quiet"], env=env, cwd=tmp,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=foreground)  # fmt: skip


def children_of(tmp: Path) -> list[int]:
    """Processes whose command line names `tmp` (every child's settings hold its folder there)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(tmp).encode() in Path(f"/proc/{pid}/cmdline").read_bytes() and int(pid) != os.getpid():
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_batch_leaves_nothing_behind_and_resumes_without_regrading(tmp_path, stop):
    folder, tmp = tmp_path / "class", tmp_path / "tmp"
    folder.mkdir()
    tmp.mkdir()
    slow = "import time\ntime.sleep(0.7)\n" + TINY.read_text()  # each submission takes a while to import
    for i in range(N):
        (folder / f"s{i}.py").write_text(slow)
    journal, csv = tmp_path / "journal.jsonl", tmp_path / "grades.csv"
    run = grade(tmp, folder, journal, csv)
    deadline = time.monotonic() + 120
    while (not journal.exists() or len(journal.read_text().splitlines()) < 3) and time.monotonic() < deadline:
        time.sleep(0.05)  # the header and two submissions recorded
    run.send_signal(stop)
    run.wait(timeout=60)
    assert run.returncode != 0
    assert list(tmp.iterdir()) == [] and children_of(tmp) == []  # no folder, no process left
    assert not csv.exists()  # the CSV comes at the end, whole, or not at all
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    head, tests = lines[0], [t["name"] for t in spec.load(TINY).tests]
    assert (head["assignment"], head["seed"], head["tests"], head["ran"]) == ("01_tiny_softmax", 5, tests, True)
    assert head["master_sha256"] == hashlib.sha256(TINY.read_bytes()).hexdigest() and 3 <= len(lines) < N + 1
    first = {e["submission"]: e for e in lines[1:]}

    again = grade(tmp, folder, journal, csv)
    again.wait(timeout=180)
    assert again.returncode == 0, again.stderr.read().decode()[-500:]
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    graded = [e["submission"] for e in lines[1:]]
    assert sorted(graded) == [f"s{i}.py" for i in range(N)]  # each exactly once
    assert all(e == first[e["submission"]] for e in lines[1:] if e["submission"] in first)  # kept, not regraded
    rows = csv.read_text().splitlines()
    assert len(rows) == N + 1 and all(r.split(",")[1] == "2" for r in rows[1:])
    assert list(tmp.iterdir()) == []


TINY_NAME = ('"01_tiny_softmax"', '"02_flash1_forward"')


@pytest.mark.parametrize(
    "text, edit, seed, message",
    [
        ("not json\n", None, None, "is not a grading journal"),
        ("{HEAD}\n" + '{"tests": 3}\n', None, None, "is not a grading journal"),
        ('{"assignment": "01_tiny_softmax", "seed": 5}\n', None, None, "records only the assignment and seed"),
        ("{HEAD}\n", TINY_NAME, None, "records assignment '02_flash1_forward'"),
        ("{HEAD}\n", None, 6, "was graded with seed 5, not 6"),
    ],
)
def test_a_journal_that_does_not_fit_is_refused_in_one_line(tmp_path, text, edit, seed, message):
    ran = tmp_path / "ran.jsonl"  # a head as a real run of TINY writes it (seed 5), `edit`ed
    grader.grade(spec.load(TINY), [TINY], seed=5, record=ran)
    head = ran.read_text().splitlines()[0]
    (tmp_path / "j.jsonl").write_text(text.replace("{HEAD}", head.replace(*edit) if edit else head))
    with pytest.raises(InputError, match=re.escape(message)):
        grader.grade(spec.load(TINY), [TINY], seed=seed, record=tmp_path / "j.jsonl")
