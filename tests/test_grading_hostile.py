"""A batch of hostile submissions (tests/hostile_submissions, one attack each) graded beside the master and an
honest classmate: each attack gets its one-line outcome, the master and the classmate still score full marks,
the CSV is whole, no temporary folder is left, and nothing outside the children's folders changed."""

import csv
import ctypes
import hashlib
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from sim.grading import csvfile, grader, resident, sandbox, spec

HERE = Path(__file__).parent
HOSTILE = HERE / "hostile_submissions"
CLASSMATE = HERE / "grading_submissions" / "02" / "algorithm1.py"
ROOT = HERE.parent
FORGED = Path("/tmp/flashsim-hostile-results.json")  # where forges_results_json.py tries to write
MASTER = spec.locate("02")
SOLUTIONS = "tried to read the instructor solutions"
EPERM = "raised PermissionError: [Errno 1] Operation not permitted (line "  # seccomp's refusal
EACCES = "raised PermissionError: [Errno 13] Permission denied: "  # Landlock's refusal
READ = "raised PermissionError: flashsim grade: a submission may not read "  # the audit hook's, naming it
REACH = "raised PermissionError: flashsim grade: a submission may not reach "  # the hook's, on a folder or link
IMPORT = "could not import the submission: raised ImportError: flashsim grade: a submission may not import "
SPAWN = "raised PermissionError: flashsim grade: a submission may not start processes "
LISTING = "imported the library's solution"

# submission → (what the first test's feedback starts with (or one of several), the flag the guard raised or None)
OUTCOMES = {
    "reads_master": (READ, SOLUTIONS),
    "replaces_realpath": (EACCES + f"'{MASTER}'", None),
    "empties_hook_rules": (EACCES + f"'{ROOT / 'sim' / 'algorithms' / 'flash1.py'}'", None),
    "swaps_fspath": (READ, SOLUTIONS),
    "hard_links_master": (REACH + "(os.link) ", SOLUTIONS),  # the hook names it before Landlock refuses the link
    "symlinks_master": (REACH + "(os.symlink) ", SOLUTIONS),
    "loads_listing_by_spec": (READ, LISTING),
    "finds_listing_in_memory": ("raised LookupError: no listing of Algorithm 1 in this process", None),
    "imports_listing": (IMPORT + "sim.algorithms", LISTING),
    "imports_api": (IMPORT + "sim.api.entry", LISTING),
    "ctypes_open": ("raised PermissionError: [Errno 13] open(2) of sim/api/entry.py refused", None),
    "reads_other_submission": (READ, "tried to read other submissions"),
    "lists_root": (EACCES + "'/'", None),
    "reads_grader_environ": (EACCES + "'/proc/", None),
    "reads_grader_memory": (EACCES + "'/proc/", None),
    "reads_grader_cmdline": (EACCES + "'/proc/", None),
    "writes_sibling_pipe": (EACCES + "'/proc/", None),
    "forges_results_json": (EACCES + f"'{FORGED}'", None),
    "writes_sim_package": (EACCES + f"'{ROOT / 'sim' / '__init__.py'}'", None),
    "fills_disk": (EACCES + "'", None),  # a driver with a memory test reads its folder and writes nothing (below)
    "fills_disk_with_files": (EACCES + "'", None),
    "opens_many_files": ("raised OSError: [Errno 24] Too many open files", None),
    "forks": (SPAWN + "(os.fork)", None),
    "clears_process_events": (EPERM, None),
    "fork_exec": (EPERM, None),
    "multiprocessing_spawn": (EPERM, None),
    "new_session": (SPAWN + "(os.posix_spawn)", None),
    "kills_grader": (EPERM, None),
    "stops_grader": (EPERM, None),
    "kills_everyone": ("raised RuntimeError: kills landed on no process (own pid ", None),
    "ptraces_grader": ("raised PermissionError: [Errno 1] ptrace(PTRACE_ATTACH) of the grader refused", None),
    "reads_grader_vm": ("raised PermissionError: [Errno 1] process_vm_readv of the grader refused", None),
    "raises_grader_limits": (EPERM, None),
    "tcp_connect": (EPERM, None),
    "udp_socket": (EPERM, None),
    "netlink_socket": (EPERM, None),
    "unix_socket": (EPERM, None),
    "stores_into_input": ("refused: store: K is an input, read-only to a submission", None),
    "edits_loaded_tile": ("O was never allocated in HBM", None),
    "header_without_message": ("malformed message: raised's message is 'nothing'", None),
    "deep_json": ("malformed message: header nests lists or objects deeper than 8", None),
    "unhashable_dtype": ("malformed message: array spec [['float32'], [1]] is not [dtype, shape]", None),
    "overflowing_shape": ("malformed message: arrays are longer than the payload", None),
    "string_peak": ("malformed message: done's peak is '0 bytes'", None),
    "huge_message": ("malformed message: a frame of 62 + 262,144,000 bytes is over the limit", None),
    "unknown_op": ("malformed message: op 'write_csv' is not one a submission's process sends", None),
    "stops_itself": ("did not finish within 2 s (its CPU time, the grader's for it, its sleeps)", None),  # stopped
    "exits_quietly": ("exited with code 0 in the middle of the test", None),
    "done_during_import": ("could not import the submission: its process answered 'done' to the import", None),
}


def fingerprint(*folders: Path) -> dict[str, str]:
    """SHA-256 of every file under `folders` (the repository's sim/ and lessons/, the batch itself)."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in folders
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Grade every hostile submission, the master (as master.py) and an honest classmate, two at a time, with the
    children's temporary folders in a folder of the test's own; the reports by file stem, and what was around."""
    base = tmp_path_factory.mktemp("hostile")
    (base / "tmp").mkdir()
    (base / "master").mkdir()
    shutil.copyfile(MASTER, base / "master" / "master.py")
    assignment = replace(spec.load(MASTER), tests=spec.load(MASTER).tests[:2])
    paths = [*sorted(HOSTILE.glob("*.py")), base / "master" / "master.py", CLASSMATE]
    before = fingerprint(ROOT / "sim", ROOT / "lessons", HOSTILE)
    FORGED.unlink(missing_ok=True)
    saved, tempfile.tempdir = tempfile.tempdir, str(base / "tmp")
    try:
        reports = grader.grade(assignment, paths, seed=3, jobs=2, limits=sandbox.Limits(wall_s=2.0))
    finally:
        tempfile.tempdir = saved
    csvfile.write(reports, base / "grades.csv", [t["name"] for t in assignment.tests])
    return {
        "reports": {Path(r.submission).stem: r for r in reports},
        "changed": sorted(
            k for k, v in fingerprint(ROOT / "sim", ROOT / "lessons", HOSTILE).items() if before.get(k) != v
        ),
        "left": sorted(p.name for p in (base / "tmp").iterdir()),
        "csv": list(csv.DictReader(open(base / "grades.csv", encoding="utf-8"))),
        "points": assignment.points,
    }


def test_there_are_at_least_thirty_attacks_each_with_its_expected_outcome():
    assert len(OUTCOMES) >= 30
    assert sorted(OUTCOMES) == sorted(p.stem for p in HOSTILE.glob("*.py"))


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_each_attack_gets_its_one_line_outcome_and_no_points(batch, name):
    report = batch["reports"][name]
    feedback, flag = OUTCOMES[name]
    assert report.tests[0].feedback.startswith(feedback), report.tests[0].feedback
    assert "\n" not in report.tests[0].feedback
    assert {f.split(":")[0] for f in report.flags} == ({flag} if flag else set())
    assert report.score == 0


def test_the_master_and_the_classmate_in_the_same_batch_score_full_marks(batch):
    for name in ("master", "algorithm1"):
        report = batch["reports"][name]
        assert [t.status for t in report.tests] == ["passed", "passed"] and report.flags == []
        assert report.score == batch["points"] == 25


def test_the_csv_has_one_whole_row_per_submission(batch):
    rows = {r["submission"]: r for r in batch["csv"]}
    assert len(rows) == len(OUTCOMES) + 2
    assert rows["master.py"]["score"] == rows["algorithm1.py"]["score"] == "25"
    assert all(rows[f"{name}.py"]["score"] == "0" for name in OUTCOMES)
    assert all(r["seed"] == "3" for r in rows.values())


def test_nothing_is_left_behind_and_nothing_outside_changed(batch):
    assert batch["left"] == []  # every child's temporary folder removed
    assert batch["changed"] == []  # sim/, lessons/ and the submissions, byte for byte
    assert not FORGED.exists()


# assignment 01's driver has no memory test: its folder stays writable, one file within the size a file may have,
# all of them within its tmpfs (where no namespace can be made, the clock stops the second)
WRITES = {
    "fills_disk": ("raised OSError: [Errno 27] File too large",),
    "fills_disk_with_files": ("raised OSError: [Errno 28] No space left on device", "did not finish within 2 s"),
}


def test_where_the_folder_is_writable_the_file_size_and_the_tmpfs_still_hold(tmp_path):
    softmax = spec.load(spec.locate("01"))
    for name in WRITES:  # the same attacks, as assignment 01's update(m, ℓ, x)
        source = (HOSTILE / f"{name}.py").read_text()
        (tmp_path / f"{name}.py").write_text(source.replace("def forward(chip, *, Br, Bc, scale):", "def update(*a):"))
    reports = grader.grade(replace(softmax, tests=softmax.tests[:1]), sorted(tmp_path.glob("*.py")), seed=3, jobs=2,
                           limits=sandbox.Limits(wall_s=2.0))  # fmt: skip
    assert len(reports) == len(WRITES)
    for report in reports:
        assert report.tests[0].feedback.startswith(WRITES[Path(report.submission).stem]), report.tests[0].feedback
        assert report.score == 0


# attacks on the memory test's measure alone (hostile_submissions/memory): elsewhere they compute the right answer
MEMORY = {
    # before: 15 / 15, "your process's memory peaked at 296.4 KiB" — 7.8 MiB of library pages dropped under VmHWM
    "drops_library_pages": "raised PermissionError: [Errno 1] madvise(MADV_DONTNEED) of a library refused (line ",
    # before: 15 / 15 too; the libraries mapped at the mark are sealed (mseal), so their remapping is refused
    "unmaps_library_pages": "raised PermissionError: [Errno 1] mmap of a library back in place failed (line ",
    # red team 83: the heap's free pages dropped by a mapping laid over them, 0.45–0.5 MiB; every mapping held at the
    # mark is sealed now, the heap's too
    "drops_heap_pages": "raised PermissionError: [Errno 1] mmap over the heap's free pages failed (line ",
}
LIBC = ctypes.CDLL(None, use_errno=True)
MSEAL = LIBC.syscall(ctypes.c_long(462), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0  # Linux 6.10+


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "no mseal"])
def test_an_attack_on_the_memory_measure_scores_0_on_the_memory_test_and_the_master_full_marks(sealed, monkeypatch):
    """Sealed: the child mseals every object it has loaded before the import, found without /proc (so for a grader
    that is not root too). Without (a kernel before 6.10; played here by resident.SEAL), unmapping them is allowed,
    and the RssFile read after the test fails it."""
    if sealed and not MSEAL:
        pytest.skip("no seal here: the kernel has no mseal (Linux 6.10+)")
    if not sealed:
        monkeypatch.setattr(resident, "SEAL", False)
    unsealed = {
        "unmaps_library_pages": "correct, but your process gave back ",
        "drops_heap_pages": "correct, but your process's resident memory rose by ",
    }  # (0.5 MiB: too little)
    expected = MEMORY | ({} if sealed else unsealed)
    assignment = spec.load(MASTER)
    memory = replace(assignment, tests=tuple(t for t in assignment.tests if t["check"] == "memory"))
    paths = [HOSTILE / "memory" / f"{name}.py" for name in MEMORY]
    assert sorted(paths) == sorted((HOSTILE / "memory").glob("*.py"))
    *attacks, master = grader.grade(memory, [*paths, MASTER], seed=3, jobs=2)
    for report, name in zip(attacks, MEMORY, strict=True):
        (t,) = report.tests
        assert t.feedback.startswith(expected[name]) and "\n" not in t.feedback, t.feedback
        assert t.points == 0 and report.flags == []
    if not sealed:
        gave_back = attacks[1].tests[0].feedback.split("gave back ")[1].split(" MiB of library pages (")[0]
        assert float(gave_back) >= 4  # more than the float32 S it held (4 MiB at N = Nk = 1024)
    assert master.score == memory.points and master.tests[0].feedback.startswith(
        "correct, and your process's memory peaked"
    )
