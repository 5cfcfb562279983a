"""What a submission's process must not leave behind or reach: a grader stuck on a full pipe, a child outliving a
killed grader, SysV IPC outliving the child, threads without number, other processes' priorities. Each attack is
a real submission (tests/hostile_submissions/containment) graded through `grader.grade`."""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from test_grading_isolation import ALLOW, ENOSYS, EPERM, verdict, walls_here

from sim.grading import grader, isolation, sandbox, spec
from sim.grading.confine import seccomp

HERE = Path(__file__).parent
ATTACKS = HERE / "hostile_submissions" / "containment"
ROOT = HERE.parent
MASTER = spec.locate("02")
ONE_TEST = replace(spec.load(MASTER), tests=spec.load(MASTER).tests[:1])
NUMBERS = {"x86_64": dict(arch=0xC000003E, read=0, clone=56, clone3=435, setpriority=141, ioprio_set=251,
                          sched_setaffinity=203, sched_setscheduler=144, shmget=29, semget=64, msgget=68,
                          mq_open=240, memfd_create=319, mmap=9, pipe2=293, socketpair=53, madvise=28, socket=41,
                          process_madvise=440),
           "aarch64": dict(arch=0xC00000B7, read=63, clone=220, clone3=435, setpriority=140, ioprio_set=30,
                           sched_setaffinity=122, sched_setscheduler=119, shmget=194, semget=190, msgget=186,
                           mq_open=180, memfd_create=279, mmap=222, pipe2=59, socketpair=199, madvise=233,
                           socket=198, process_madvise=440)}  # fmt: skip
PRIO_PROCESS, PRIO_PGRP, PRIO_USER = 0, 1, 2
# madvise's advice that leaves every page where it is (<linux/mman-common.h>): NORMAL, RANDOM, SEQUENTIAL, WILLNEED,
# DONTFORK, DOFORK, MERGEABLE, UNMERGEABLE, HUGEPAGE, NOHUGEPAGE, DONTDUMP, DODUMP, WIPEONFORK, KEEPONFORK,
# POPULATE_READ, POPULATE_WRITE, COLLAPSE; not DONTNEED 4, FREE 8, REMOVE 9, COLD 20, PAGEOUT 21, DONTNEED_LOCKED 24,
# HWPOISON 100, SOFT_OFFLINE 101, GUARD_INSTALL 102, nor numbers it does not know
KEEPS_PAGES = (0, 1, 2, 3, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 22, 23, 25)
IOPRIO_WHO_PROCESS, IOPRIO_WHO_USER = 1, 3
MAP_SHARED, MAP_PRIVATE, MAP_SHARED_VALIDATE, MAP_ANONYMOUS = 0x01, 0x02, 0x03, 0x20
MAPPINGS = ((MAP_PRIVATE | MAP_ANONYMOUS, ALLOW), (MAP_SHARED, ALLOW), (MAP_PRIVATE, ALLOW),  # malloc's, files'
            (MAP_SHARED | MAP_ANONYMOUS, EPERM), (MAP_SHARED_VALIDATE | MAP_ANONYMOUS, EPERM))  # fmt: skip


def thread_bomb(entry: str, then: str) -> str:
    """A submission whose function `entry` starts 1000 native threads (16 KiB stacks) through the C library, where
    Python's own checks do not see them, then runs the lines `then` (n: the threads started)."""
    return f"""
import ctypes
import time


def {entry}:
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(64)
    libc.pthread_attr_init(attr)
    libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(16384))
    fn, tid, n = ctypes.cast(libc.pause, ctypes.c_void_p), ctypes.c_ulong(), 0
    while n < 1000 and libc.pthread_create(ctypes.byref(tid), attr, fn, None) == 0:
        n += 1
{then}
"""


# on the GPU driver's walls, which CUDA's own threads keep seccomp from sealing
THREADS = thread_bomb(
    "forward(chip, *, Br, Bc, scale)", '    time.sleep(3)\n    raise RuntimeError(f"{n} native threads ran for 3 s")'
)


def feedback(name: str, **kwargs) -> str:
    """The first test's feedback for the attack `name`, graded alone."""
    (report,) = grader.grade(ONE_TEST, [ATTACKS / f"{name}.py"], seed=1, **kwargs)
    assert report.score == 0 and "\n" not in report.tests[0].feedback
    return report.tests[0].feedback


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_keeps_priorities_ipc_and_shared_memory_to_the_process_itself(monkeypatch, machine):
    monkeypatch.setattr(seccomp, "MACHINE", machine)
    me, n = 4242, NUMBERS[machine]
    code, arch = seccomp.program(me), n["arch"]
    assert verdict(code, n["setpriority"], arch, (PRIO_PROCESS, 0, 19, 0, 0, 0)) == ALLOW
    assert verdict(code, n["setpriority"], arch, (PRIO_PROCESS, me, 19, 0, 0, 0)) == ALLOW
    assert verdict(code, n["setpriority"], arch, (PRIO_USER, 0, 19, 0, 0, 0)) == EPERM  # every process of its uid
    assert verdict(code, n["setpriority"], arch, (PRIO_PGRP, 0, 19, 0, 0, 0)) == EPERM
    assert verdict(code, n["setpriority"], arch, (PRIO_PROCESS, me + 1, 19, 0, 0, 0)) == EPERM
    assert verdict(code, n["ioprio_set"], arch, (IOPRIO_WHO_PROCESS, 0, 7, 0, 0, 0)) == ALLOW
    assert verdict(code, n["ioprio_set"], arch, (IOPRIO_WHO_USER, 0, 7, 0, 0, 0)) == EPERM
    assert verdict(code, n["ioprio_set"], arch, (IOPRIO_WHO_PROCESS, 1, 7, 0, 0, 0)) == EPERM
    for name in ("sched_setaffinity", "sched_setscheduler"):
        assert verdict(code, n[name], arch, (0, 0, 0, 0, 0, 0)) == ALLOW
        assert verdict(code, n[name], arch, (me, 0, 0, 0, 0, 0)) == ALLOW
        assert verdict(code, n[name], arch, (1, 0, 0, 0, 0, 0)) == EPERM
    for name in ("shmget", "semget", "msgget", "mq_open", "memfd_create"):
        assert verdict(code, n[name], arch) == EPERM, name
    for flags, expected in MAPPINGS:
        assert verdict(code, n["mmap"], arch, (0, 4096, 3, flags, 0, 0)) == expected, hex(flags)
    for advice in [*range(0, 30), *range(100, 105), 0xFFFFFFFF]:  # <linux/mman-common.h>'s MADV_*, and beyond
        expected = ALLOW if advice in KEEPS_PAGES else EPERM
        assert verdict(code, n["madvise"], arch, (0, 4096, advice, 0, 0, 0)) == expected, advice
    assert verdict(code, n["process_madvise"], arch, ((-10001) & 0xFFFFFFFF, 0, 1, 21, 0, 0)) == EPERM  # PIDFD_SELF
    cuda = seccomp.program(me, cuda=True)  # the GPU driver's: what CUDA's initialization needs, and no more
    AF_UNIX, AF_INET, SIGCHLD = 1, 2, 17
    assert verdict(cuda, n["socket"], arch, (AF_UNIX, 1, 0, 0, 0, 0)) == ALLOW
    assert verdict(cuda, n["socket"], arch, (AF_INET, 1, 0, 0, 0, 0)) == EPERM == verdict(code, n["socket"], arch)
    assert verdict(cuda, n["mmap"], arch, (0, 4096, 3, MAP_SHARED | MAP_ANONYMOUS, 0, 0)) == ALLOW
    assert verdict(cuda, n["clone"], arch, (SIGCHLD, 0, 0, 0, 0, 0)) == EPERM  # fork's clone, still refused
    assert verdict(cuda, n["shmget"], arch) == EPERM
    for advice, expected in ((4, ALLOW), (8, ALLOW), (14, ALLOW), (20, EPERM), (21, EPERM)):  # its own: kept
        assert verdict(cuda, n["madvise"], arch, (0, 4096, advice, 0, 0, 0)) == expected, advice
    sealed = seccomp.sealed_program()  # stacked once the harness is loaded
    assert verdict(sealed, n["clone"], arch, (0x3D0F00, 0, 0, 0, 0, 0)) == EPERM  # pthread_create's flags
    assert verdict(sealed, n["clone3"], arch) == ENOSYS and verdict(sealed, n["read"], arch) == ALLOW
    assert verdict(sealed, n["pipe2"], arch) == verdict(sealed, n["socketpair"], arch, (1, 1, 0, 0, 0, 0)) == EPERM


@walls_here
def test_a_child_that_fills_its_pipe_and_sleeps_does_not_hang_the_grader():
    # in a process of its own: before the fix, the grader blocked for ever writing "bye" into the full pipe
    script = (
        "import sys; from dataclasses import replace; from pathlib import Path\n"
        "from sim.grading import grader, sandbox, spec\n"
        "a = spec.load(spec.locate('02')); a = replace(a, tests=a.tests[2:3])\n"  # N ≥ 100: a tile fills a page
        "paths, limits = [Path(sys.argv[1]), spec.locate('02')], sandbox.Limits(wall_s=3)\n"
        "print([r.score == a.points for r in grader.grade(a, paths, seed=1, jobs=1, limits=limits)])\n"
    )
    grading = subprocess.Popen([sys.executable, "-c", script, str(ATTACKS / "fills_pipe_then_sleeps.py")], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        out, err = grading.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        children = _children(grading.pid)
        grading.kill()
        for child in children:  # its own session: the grader's kill does not reach it
            os.kill(child, signal.SIGKILL)
        grading.communicate()
        pytest.fail("the grader hung on the child's full pipe")
    assert grading.returncode == 0, err[-2000:]
    assert out.strip() == "[False, True]"  # the attack scores 0, the master after it full marks


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` and that run the grading bootstrap for a submission (not the probe)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read()
            argv = open(f"/proc/{entry}/cmdline", "rb").read()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"confine.apply(" in argv and b'"probe": true' not in argv:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, waiting for whoever adopted it to reap it, does not)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@walls_here
def test_a_grader_killed_outright_takes_its_children_with_it():
    # a grader killed outright removes no child's folder: the grader's temporary folder is the test's, removed below
    # (in /tmp, 34 folders of sleeps.py were left by earlier runs)
    tmp = tempfile.mkdtemp(prefix="flashsim-killed-")
    os.chmod(tmp, 0o755)  # open to a root grader's children (uid 65534) as /tmp is: the walls are the usual ones
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": tmp}
    grading = subprocess.Popen([sys.executable, "-m", "sim.cli", "grade", str(MASTER), str(ATTACKS / "sleeps.py"),
                                "--seed", "1"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    children = []
    try:
        deadline = time.monotonic() + 60
        while not children and time.monotonic() < deadline:
            time.sleep(0.2)
            children = _children(grading.pid)
        assert children, "no graded child started"
        time.sleep(1.0)  # into its sleep: confined, the submission running
        grading.kill()
        grading.wait()
        time.sleep(2.0)
        assert [c for c in children if _alive(c)] == []
    finally:
        grading.kill()
        grading.wait()
        for child in children:  # before the fix: an orphan sleeping for two minutes
            if _alive(child):
                os.kill(child, signal.SIGKILL)
        shutil.rmtree(tmp)


def _ipc_ids() -> dict[str, set[str]]:
    """The SysV IPC objects of this IPC namespace, by kind (their ids)."""
    return {kind: {line.split()[1] for line in open(f"/proc/sysvipc/{kind}").readlines()[1:]}
            for kind in ("shm", "sem", "msg")}  # fmt: skip


@walls_here
def test_sysv_ipc_message_queues_and_memfd_are_refused_by_seccomp_alone(monkeypatch):
    monkeypatch.setattr(isolation, "WITHOUT", frozenset({"namespaces"}))  # no IPC namespace: seccomp must hold
    before = _ipc_ids()
    try:
        line = feedback("sysv_ipc")
    finally:  # before the fix: 64 MiB of shared memory, a semaphore set and two queues stayed behind
        libc = ctypes.CDLL(None, use_errno=True)
        left = {kind: ids - before[kind] for kind, ids in _ipc_ids().items()}
        for kind, remove in (("shm", libc.shmctl), ("sem", libc.semctl), ("msg", libc.msgctl)):
            for i in left[kind]:
                remove(int(i), 0, None)  # IPC_RMID
        libc.mq_unlink(b"/flashsim-hostile")
    assert line.startswith(
        "raised RuntimeError: shmget EPERM; semget EPERM; msgget EPERM; mq_open EPERM; memfd_create EPERM (line "
    ), line
    assert left == {"shm": set(), "sem": set(), "msg": set()}


@walls_here
def test_a_files_mode_owner_times_and_attributes_outside_the_folder_stay_as_they_were():
    target = Path("/tmp/flashsim-metadata-target")  # the attack names it; a file of the instructor's
    target.write_text("the instructor's")
    target.chmod(0o644)
    uid = grader.isolate(ONE_TEST, [MASTER]).settings["uid"]  # a root grader's children: uid 65534
    if uid is not None:  # theirs, as an ordinary user's files are to its children: file modes refuse nothing,
        os.chown(target, uid, uid)  # so only seccomp can (as root, the kernel said EPERM to uid 65534 anyway)
    before = target.stat()
    try:
        line = feedback("changes_metadata")
        after = target.stat()
    finally:
        target.chmod(0o644)
        target.unlink()
    assert line.startswith(
        "raised RuntimeError: chmod EPERM; fchmodat EPERM; chown EPERM; utimensat EPERM; setxattr EPERM (line "
    ), line
    assert (after.st_mode, after.st_uid, after.st_mtime_ns) == (before.st_mode, before.st_uid, before.st_mtime_ns)


@walls_here
def test_the_isolation_line_names_the_ipc_namespace_where_there_is_one():
    line = grader.isolate(ONE_TEST, [MASTER]).line()
    assert "namespaces" not in line or "user+mount+net+ipc namespaces (" in line


@walls_here
def test_threads_are_refused_once_the_submission_runs_and_an_honest_one_still_passes():
    paths = [ATTACKS / "thread_bomb.py", ATTACKS / "python_thread.py", MASTER]
    bomb, python, master = grader.grade(ONE_TEST, paths, seed=1, jobs=2, limits=sandbox.Limits(wall_s=5.0))
    assert bomb.tests[0].feedback.startswith("raised RuntimeError: 0 native threads started in "), bomb.tests[0]
    assert "(pthread_create error 1)" in bomb.tests[0].feedback  # EPERM, from the sealed filter
    assert python.tests[0].feedback.startswith(
        "raised PermissionError: flashsim grade: a submission may not start threads (refused by the grader's "
        "seccomp filter) (line 8, in forward)"
    ), python.tests[0].feedback
    assert bomb.score == python.score == 0 and master.score == ONE_TEST.points


@walls_here
def test_priorities_and_schedules_reach_no_other_process():
    assert feedback("renices_others").startswith(
        "raised RuntimeError: nice self ok; nice group EPERM; nice uid EPERM; ioprio self ok; ioprio uid EPERM; "
        "affinity pid EPERM; scheduler pid EPERM; param pid EPERM (line "
    )


FORKS = """
import ctypes
import errno


def forward(chip, *, Br, Bc, scale):
    libc = ctypes.CDLL(None, use_errno=True)
    pid = libc.fork()
    if pid == 0:
        libc._exit(0)
    raise RuntimeError(f"fork {'made' if pid > 0 else errno.errorcode[ctypes.get_errno()]}")
"""


@walls_here
def test_the_gpu_drivers_walls_stop_a_thread_bomb_and_a_fork_without_a_gpu(tmp_path):
    # the GPU driver's own isolation (Landlock with CUDA's system folders; seccomp with CUDA's threads, Unix sockets
    # and shared memory allowed, never sealed), on a chip test
    walls = grader.isolate(spec.load(spec.locate("05")), [MASTER]).kernel  # its kernel's process's
    assert walls.missing == () and seccomp.CUDA in walls.layers  # before: neither Landlock nor seccomp
    (tmp_path / "threads.py").write_text(THREADS)
    (tmp_path / "forks.py").write_text(FORKS)
    paths = [tmp_path / "threads.py", tmp_path / "forks.py", MASTER]
    bomb, forks, master = grader.grade(ONE_TEST, paths, seed=1, jobs=2, walls=walls)
    assert bomb.tests[0].feedback == "ran more than 64 threads at once; stopped"  # before: "1000 native threads ran"
    assert forks.tests[0].feedback.startswith("raised RuntimeError: fork EPERM (line "), forks.tests[0].feedback
    assert bomb.score == forks.score == 0 and master.score == ONE_TEST.points
