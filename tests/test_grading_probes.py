"""Probes that read no byte of a denied file but learn whether it exists, its size and date: os.stat, os.path.exists,
os.access, … . Python audits none of them and Landlock refuses none, so the guard watches posix's functions itself:
each probe below is a real submission graded through `grader.grade`, refused and flagged as a read of the same path
is, and the routes to an unwatched stat (a fresh posix, another interpreter, a dir_fd) are closed."""

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from sim.grading import grader, spec

HERE = Path(__file__).parent
MASTER = spec.locate("02")
ROOT = MASTER.parents[2]
ONE_TEST = replace(spec.load(MASTER), tests=spec.load(MASTER).tests[:1])
CLASSMATE = HERE / "grading_submissions" / "02" / "algorithm1.py"
SOLUTIONS = "tried to read the instructor solutions"
OTHERS = "tried to read other submissions"
REACH = "raised PermissionError: flashsim grade: a submission may not reach "
HEAD = """import os

MASTER = {master!r}
ROOT, RELATIVE = {root!r}, {relative!r}  # the repository, and the master's path in it
CLASSMATE = os.path.join({folder!r}, "bob.py")  # in the folder the class's files are graded from
"""
# submission → (its forward's body, what its feedback starts with, what its flag says or None: of the master, or of
# bob.py in the class's folder); every body ends by saying what it learnt, as it did before the guard watched
PROBES = {
    "stats_master": ("st = os.stat(MASTER)", f"{REACH}(os.stat) {MASTER} ({SOLUTIONS})", SOLUTIONS),
    "lstats_master": ("st = os.lstat(MASTER)", f"{REACH}(os.lstat) {MASTER}", SOLUTIONS),
    "path_stat": ("import pathlib; st = pathlib.Path(MASTER).stat()", f"{REACH}(os.stat) {MASTER}",
                  SOLUTIONS),
    "exists_master": ("st = os.path.exists(MASTER)", "raised RuntimeError: learnt False (line ",
                      SOLUTIONS),  # exists() says False where stat is refused: the flag stands
    "accesses_master": ("st = os.access(MASTER, os.R_OK)", f"{REACH}(os.access) {MASTER}", SOLUTIONS),
    "statvfs_master": ("st = os.statvfs(MASTER)", f"{REACH}(os.statvfs) {MASTER}", SOLUTIONS),
    "mkfifo_master": ("st = os.mkfifo(MASTER)", f"{REACH}(os.mkfifo) {MASTER}", SOLUTIONS),
    "stats_classmate": ("st = os.path.isfile(CLASSMATE)", "raised RuntimeError: learnt False (line ", OTHERS),
    "stats_by_dir_fd": ("st = os.stat(RELATIVE, dir_fd=os.open(ROOT, os.O_PATH))", f"{REACH}(os.stat) {MASTER}",
                        SOLUTIONS),
    "stats_by_cwd_fd": ("st = os.stat(os.path.relpath(MASTER), dir_fd=-100)", f"{REACH}(os.stat) {MASTER}",
                        SOLUTIONS),  # AT_FDCWD
    "opens_path_by_dir_fd": ("st = os.fstat(os.open(RELATIVE, os.O_PATH, dir_fd=os.open(ROOT, os.O_PATH)))",
                             f"{REACH}(os.open) {MASTER}", SOLUTIONS),
    "stat_from_supports": ("st = [f for f in os.supports_dir_fd if f.__name__ == 'stat'][0](MASTER)",
                           f"{REACH}(os.stat) {MASTER}", SOLUTIONS),
    "fresh_posix": ("import importlib.util as u; st = u.module_from_spec(u.find_spec('posix')).stat(MASTER)",
                    "raised ImportError: flashsim grade: a submission may not create the module 'posix' again", None),
    "posix_imported_again": ("import sys; del sys.modules['posix']; import posix; st = posix.stat(MASTER)",
                             "raised ImportError: flashsim grade: a submission may not create the module 'posix'",
                             None),
    "subinterpreter": ("import _xxsubinterpreters as s; st = s.run_string(s.create(), 'import os')",
                       "raised RuntimeError: interpreter creation failed", None),  # the guard's refusal, renamed
}  # fmt: skip
SHIFTY = """
class Shifty:  # its own file when asked first, the master when asked again
    calls = 0

    def __fspath__(self):
        Shifty.calls += 1
        return __file__ if Shifty.calls == 1 else MASTER
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Every probe, a path-like object that names its own file first and the master after, and an honest
    classmate, graded in one batch from one folder; the reports by file stem."""
    folder = tmp_path_factory.mktemp("class")
    head = HEAD.format(master=str(MASTER), root=str(ROOT), relative=str(MASTER.relative_to(ROOT)), folder=str(folder))
    for name, (body, _, _) in {**PROBES, "shifty": ("st = os.stat(Shifty()).st_size", "", None)}.items():
        forward = f"def forward(chip, *, Br, Bc, scale):\n    {body}\n    raise RuntimeError(f'learnt {{st}}')\n"
        (folder / f"{name}.py").write_text(head + (SHIFTY if name == "shifty" else "") + "\n\n" + forward)
    shutil.copyfile(CLASSMATE, folder / "alice.py")
    reports = grader.grade(ONE_TEST, sorted(folder.glob("*.py")), seed=2, jobs=2)
    return {Path(r.submission).stem: r for r in reports}, folder


@pytest.mark.parametrize("name", sorted(PROBES))
def test_each_probe_is_refused_in_one_line_and_flagged_as_a_read(batch, name):
    reports, folder = batch
    report, (_, feedback, flag) = reports[name], PROBES[name]
    assert report.tests[0].feedback.startswith(feedback), report.tests[0].feedback
    assert "\n" not in report.tests[0].feedback and report.score == 0
    assert report.flags == ([f"{flag}: {MASTER if flag == SOLUTIONS else folder / 'bob.py'}"] if flag else [])


def test_a_path_like_object_is_asked_for_its_path_once(batch):
    reports, folder = batch
    feedback = reports["shifty"].tests[0].feedback  # the stat was of its own file: the name checked is the one used
    assert feedback.startswith(f"raised RuntimeError: learnt {(folder / 'shifty.py').stat().st_size} (line ")
    assert reports["shifty"].flags == []


def test_the_honest_classmate_in_the_same_batch_is_not_flagged(batch):
    reports, _ = batch
    assert reports["alice"].score == ONE_TEST.points and reports["alice"].flags == []
