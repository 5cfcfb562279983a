"""A seccomp filter (classic BPF, built here byte by byte): the child starts no process, traces or reads no other,
signals, renices or re-schedules nothing but itself, opens no socket, makes no SysV IPC, POSIX message queue,
memfd or shared anonymous mapping, sends no page to swap, and changes no file's mode, owner, times or extended
attributes. Everything else is allowed; what is refused fails with EPERM (clone3 with ENOSYS, so the C library
falls back to clone for a thread). Once the harness is loaded a second filter refuses threads, pipes and socket
pairs too. Constants: <linux/seccomp.h>, <linux/filter.h>, <linux/audit.h>, <linux/mman.h>, and the system call
tables of x86_64 and aarch64."""

import ctypes
import errno
import os

from sim.grading.confine.syscall import MACHINE, prctl

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2  # prctl: install a filter (needs PR_SET_NO_NEW_PRIVS or CAP_SYS_ADMIN)
PR_GET_SECCOMP = 21
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000  # SECCOMP_RET_* (ERRNO | errno)
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|JGE|JSET|K, BPF_RET|K
NR, ARCH, ARG = 0, 4, lambda i: 16 + 8 * i  # struct seccomp_data offsets (an argument's low 32 bits, little-endian)
CLONE_THREAD = 0x00010000
MAP_SHARED, MAP_ANONYMOUS = 0x01, 0x20  # mmap's flags (MAP_SHARED_VALIDATE, 0x03, has the first)
MADV_COLD, MADV_PAGEOUT = 20, 21  # madvise: pages sent towards swap leave VmHWM's count (a memory test's matrix)
# madvise's advice that keeps every page where it is (half-open ranges): NORMAL…WILLNEED, DONTFORK…KEEPONFORK,
# POPULATE_READ/WRITE, COLLAPSE. The rest drops pages the process holds (DONTNEED 4, FREE 8, REMOVE 9, COLD 20,
# PAGEOUT 21, DONTNEED_LOCKED 24, HWPOISON 100, SOFT_OFFLINE 101, GUARD_INSTALL 102, and any advice yet to come):
# under VmHWM, reset at the mark, that is room for a memory test's matrix (its library pages: 8 MiB of NumPy's)
KEEPS_PAGES = ((0, 4), (10, 20), (22, 24), (25, 26))
X32_BIT = 0x40000000  # x86_64: numbers at or above it are the x32 ABI's, another table; refused whole

ARCHES = {  # AUDIT_ARCH_* (EM_* | 64-bit | little-endian), then the numbers the filter names
    "x86_64": (0xC000003E, dict(
        fork=57, vfork=58, execve=59, execveat=322, clone=56, clone3=435, ptrace=101, process_vm_readv=310,
        process_vm_writev=311, kill=62, tkill=200, tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297,
        prlimit64=302, setpriority=141, socket=41, socketpair=53, pidfd_open=434, pidfd_send_signal=424,
        pidfd_getfd=438, unshare=272, setns=308, mount=165, bpf=321, perf_event_open=298, userfaultfd=323,
        io_uring_setup=425, kcmp=312, keyctl=250, add_key=248, open_by_handle_at=304,
        shmget=29, shmat=30, shmctl=31, shmdt=67, semget=64, semop=65, semctl=66, semtimedop=220, msgget=68,
        msgsnd=69, msgrcv=70, msgctl=71, mq_open=240, mq_unlink=241, mq_timedsend=242, mq_timedreceive=243,
        mq_notify=244, mq_getsetattr=245, memfd_create=319, memfd_secret=447, ioprio_set=251,
        sched_setparam=142, sched_setscheduler=144, sched_setaffinity=203, sched_setattr=314, migrate_pages=256,
        move_pages=279, mmap=9, chmod=90, fchmod=91, fchmodat=268, fchmodat2=452, chown=92, fchown=93, lchown=94,
        fchownat=260, utime=132, utimes=235, futimesat=261, utimensat=280, setxattr=188, lsetxattr=189,
        fsetxattr=190, removexattr=197, lremovexattr=198, fremovexattr=199, pipe=22, pipe2=293, madvise=28,
        process_madvise=440)),
    "aarch64": (0xC00000B7, dict(
        execve=221, execveat=281, clone=220, clone3=435, ptrace=117, process_vm_readv=270, process_vm_writev=271,
        kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240, prlimit64=261,
        setpriority=140, socket=198, socketpair=199, pidfd_open=434, pidfd_send_signal=424, pidfd_getfd=438,
        unshare=97, setns=268, mount=40, bpf=280, perf_event_open=241, userfaultfd=282, io_uring_setup=425,
        kcmp=272, keyctl=219, add_key=217, open_by_handle_at=265,
        shmget=194, shmat=196, shmctl=195, shmdt=197, semget=190, semop=193, semctl=191, semtimedop=192,
        msgget=186, msgsnd=189, msgrcv=188, msgctl=187, mq_open=180, mq_unlink=181, mq_timedsend=182,
        mq_timedreceive=183, mq_notify=184, mq_getsetattr=185, memfd_create=279, memfd_secret=447, ioprio_set=30,
        sched_setparam=118, sched_setscheduler=119, sched_setaffinity=122, sched_setattr=274, migrate_pages=238,
        move_pages=239, mmap=222, fchmod=52, fchmodat=53, fchmodat2=452, fchownat=54, fchown=55, utimensat=88,
        setxattr=5, lsetxattr=6, fsetxattr=7, removexattr=14, lremovexattr=15, fremovexattr=16, pipe2=59, madvise=233,
        process_madvise=440)),
}  # fmt: skip
# SysV IPC and POSIX message queues: kernel objects that outlive the process and that RLIMIT_AS does not count
# (2 × 256 MiB of shmget stayed behind after grading); memfd: memory outside the address space's limit too.
# Nothing the harness runs uses them (strace of its imports and a matmul under tracemalloc). A shared anonymous
# mapping is memory too that VmHWM stops counting once madvise(MADV_DONTNEED) drops its pages from the process
# (they stay in the mapping's shmem): a memory test's N × Nk matrix parked there, as in files, went unseen.
IPC = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop", "msgget", "msgsnd",
       "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
       "memfd_create", "memfd_secret")  # fmt: skip
# A file's mode, owner, times and extended attributes: Landlock does not guard them, and the child, uid 0 without
# capabilities, owns every root-owned file (a master, the grader's own) — `chmod 000` would stop the next grade.
METADATA = ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
            "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
            "fremovexattr")  # fmt: skip
DENIED = ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "tkill",
          "socket", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "unshare", "setns", "mount", "bpf",
          "perf_event_open", "userfaultfd", "io_uring_setup", "kcmp", "keyctl", "add_key", "open_by_handle_at",
          *IPC, *METADATA)  # fmt: skip
OWN_PID_FIRST = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # allowed when argument 0 is our pid
# allowed when this argument is 0 (this process) or our pid: as uid 0 (no capabilities) the child may still renice,
# re-schedule or pin every other process of root's, the grader's and the machine's own
SELF_OR_ZERO = {"prlimit64": 0, "sched_setparam": 0, "sched_setscheduler": 0, "sched_setaffinity": 0,
                "sched_setattr": 0, "migrate_pages": 0, "move_pages": 0}  # fmt: skip
# allowed when argument 0 is `which` names one process (PRIO_USER or PRIO_PGRP reach every process of a uid or
# group) and argument 1 is 0 or our pid: setpriority's PRIO_PROCESS is 0, ioprio_set's IOPRIO_WHO_PROCESS is 1
ONE_PROCESS = {"setpriority": 0, "ioprio_set": 1}
AF_UNIX = 1
CUDA = "seccomp (CUDA's threads, Unix sockets and shared memory allowed)"  # the GPU driver's layer: never sealed
SEALED = ("pipe", "pipe2", "socketpair")  # refused by the second filter too (`sealed_program`), with clone


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def available() -> bool:
    """Whether this kernel has seccomp filters and the filter knows this machine's system call numbers."""
    try:
        return MACHINE in ARCHES and prctl(PR_GET_SECCOMP) >= 0
    except OSError:
        return False


def program(pid: int, cuda: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter for a process whose pid is `pid`, as (code, jt, jf, k) instructions; `cuda`: the GPU driver's,
    which lets CUDA's runtime have what its initialization fails without (a Unix socket, shared anonymous memory)."""
    arch, numbers = ARCHES[MACHINE]
    deny = RET_ERRNO | errno.EPERM
    out = [(LD_W_ABS, 0, 0, ARCH), (JEQ_K, 1, 0, arch), (RET_K, 0, 0, RET_KILL_PROCESS), (LD_W_ABS, 0, 0, NR)]
    if MACHINE == "x86_64":
        out += [(JGE_K, 0, 1, X32_BIT), (RET_K, 0, 0, RET_KILL_PROCESS)]

    def when(name: str, test: list, verdict_if_true: int, otherwise: int) -> None:
        """If the call is `name`: run `test` (loads, then one jump whose true branch skips one), return a verdict."""
        if name not in numbers:
            return
        body = [*test, (RET_K, 0, 0, otherwise), (RET_K, 0, 0, verdict_if_true)]
        out.extend([(JEQ_K, 0, len(body), numbers[name]), *body, (LD_W_ABS, 0, 0, NR)])

    for name in DENIED:
        if not (cuda and name == "socket"):
            when(name, [(JEQ_K, 1, 1, 0)], deny, deny)  # an unconditional refusal (both branches deny)
    if cuda:
        when("socket", [(LD_W_ABS, 0, 0, ARG(0)), (JEQ_K, 1, 0, AF_UNIX)], RET_ALLOW, deny)
    when("clone3", [(JEQ_K, 1, 1, 0)], RET_ERRNO | errno.ENOSYS, RET_ERRNO | errno.ENOSYS)
    when("clone", [(LD_W_ABS, 0, 0, ARG(0)), (JSET_K, 1, 0, CLONE_THREAD)], RET_ALLOW, deny)
    for name in OWN_PID_FIRST:
        when(name, [(LD_W_ABS, 0, 0, ARG(0)), (JEQ_K, 1, 0, pid)], RET_ALLOW, deny)
    for name, i in SELF_OR_ZERO.items():
        when(name, [(LD_W_ABS, 0, 0, ARG(i)), (JEQ_K, 2, 0, 0), (JEQ_K, 1, 0, pid)], RET_ALLOW, deny)
    for name, which in ONE_PROCESS.items():  # `which` wrong: jump past the test of `who` to the refusal
        test = [(LD_W_ABS, 0, 0, ARG(0)), (JEQ_K, 0, 3, which), (LD_W_ABS, 0, 0, ARG(1)), (JEQ_K, 2, 0, 0)]
        when(name, [*test, (JEQ_K, 1, 0, pid)], RET_ALLOW, deny)
    when("socketpair", [(LD_W_ABS, 0, 0, ARG(0)), (JEQ_K, 1, 0, AF_UNIX)], RET_ALLOW, deny)
    shared = [(LD_W_ABS, 0, 0, ARG(3)), (JSET_K, 0, 1, MAP_ANONYMOUS), (JSET_K, 1, 0, MAP_SHARED)]  # both flags: deny
    when(
        "mmap", shared, RET_ALLOW if cuda else deny, RET_ALLOW
    )  # CUDA maps shared memory; a GPU test has no memory test
    if cuda:  # a GPU test has no memory test; CUDA's runtime keeps the advice it gives
        cold = [(LD_W_ABS, 0, 0, ARG(2)), (JEQ_K, 2, 0, MADV_COLD), (JEQ_K, 1, 0, MADV_PAGEOUT)]
        when("madvise", cold, deny, RET_ALLOW)
    else:
        when("madvise", [(LD_W_ABS, 0, 0, ARG(2)), *_within(KEEPS_PAGES)], RET_ALLOW, deny)
        when("process_madvise", [(JEQ_K, 1, 1, 0)], deny, deny)  # PAGEOUT of its own pages (PIDFD_SELF, Linux 6.15)
    return [*out, (RET_K, 0, 0, RET_ALLOW)]


def _within(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int, int, int]]:
    """Jumps for `program`'s `when`: the value loaded (unsigned) in one of the half-open `ranges` skips to the verdict
    if true; below a range's start, or past the last, it falls to the other verdict."""
    n, out = 2 * len(ranges), []
    for k, (low, high) in enumerate(ranges):  # each jump's false branch lands on the verdict after the last jump
        out += [(JGE_K, 0, n - 2 * k - 1, low), (JGE_K, 0, n - 2 * k - 1, high)]
    return out


def sealed_program() -> list[tuple[int, int, int, int]]:
    """A second filter, stacked on the first once the harness is loaded: no clone at all (no thread; fork was
    refused already), clone3 ENOSYS as before; no new pipe or socket pair (their kernel buffers, 1 MiB a pipe,
    would keep a memory test's N × Nk matrix where VmHWM does not count it). The first filter has checked the
    architecture."""
    numbers = ARCHES[MACHINE][1]
    deny, nosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    out = [(LD_W_ABS, 0, 0, NR), (JEQ_K, 0, 1, numbers["clone3"]), (RET_K, 0, 0, nosys)]
    for name in ("clone", *SEALED):
        if name in numbers:
            out += [(JEQ_K, 0, 1, numbers[name]), (RET_K, 0, 0, deny)]
    return [*out, (RET_K, 0, 0, RET_ALLOW)]


def apply(cuda: bool = False) -> str:
    """Install the filter on this process (PR_SET_NO_NEW_PRIVS must be set); the layer's words."""
    _install(program(os.getpid(), cuda))
    return CUDA if cuda else "seccomp"


def seal() -> None:
    """Install `sealed_program` (a filter cannot be removed, and a later one can only refuse more)."""
    _install(sealed_program())


def _install(code: list[tuple[int, int, int, int]]) -> None:
    filters = (SockFilter * len(code))(*(SockFilter(*i) for i in code))
    prog = SockFprog(len(code), filters)
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))
